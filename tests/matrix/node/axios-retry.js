// axios with axios-retry, as its README shows: retries: 3 and
// retryDelay: axiosRetry.exponentialDelay, everything else default (retryCondition
// isNetworkOrIdempotentRequestError: network errors, and a 429 or 5xx of GET, HEAD, OPTIONS,
// PUT or DELETE). exponentialDelay waits at least the Retry-After it can read (a number or a
// date). axios reads HTTP_PROXY itself. A POST sends a JSON body.
//
// Usage: node axios-retry.js METHOD URL. Exits 0 on success, 1 otherwise.
const axios = require("axios");
const axiosRetry = require("axios-retry").default;

axiosRetry(axios, { retries: 3, retryDelay: axiosRetry.exponentialDelay });
axios
  .request({
    method: process.argv[2],
    url: process.argv[3],
    data: process.argv[2] === "POST" ? {} : undefined,
  })
  .then(() => process.exit(0))
  .catch((error) => {
    console.error(String(error));
    process.exit(1);
  });
