// @microsoft/microsoft-graph-client: Client.initWithMiddleware with an auth provider, so the
// default middleware chain (authentication, RetryHandler at its defaults, redirect, telemetry,
// fetch). A GET lists the users (GET /v1.0/users); a POST creates one (POST /v1.0/users). The
// base URL is the URL given, never Microsoft's host. The token is static; the SDK attaches it
// only to https URLs of Graph or of customHosts, so this plain-HTTP upstream never sees it.
// The SDK calls the global fetch, which on Node 20 ignores HTTP_PROXY, so undici's
// EnvHttpProxyAgent is made the global dispatcher, as for openai-node.
//
// Usage: node msgraph.js METHOD URL. Exits 0 on success, 1 otherwise.
const { Client } = require("@microsoft/microsoft-graph-client");
const { EnvHttpProxyAgent, setGlobalDispatcher } = require("undici");

setGlobalDispatcher(new EnvHttpProxyAgent());
const client = Client.initWithMiddleware({
  baseUrl: process.argv[3],
  authProvider: { getAccessToken: async () => "matrix-token" },
});
const users = client.api("/users");
const request =
  process.argv[2] === "POST"
    ? users.post({
        accountEnabled: true,
        displayName: "Matrix",
        mailNickname: "matrix",
        userPrincipalName: "matrix@example.com",
        passwordProfile: { password: "matrix-password" },
      })
    : users.get();
request
  .then(() => process.exit(0))
  .catch((error) => {
    // A GraphError carries the HTTP status (-1 when no answer came).
    const status = error.statusCode > 0 ? ` ${error.statusCode}` : "";
    const message = error.message ? `: ${error.message}` : "";
    console.error(`${error.constructor.name}${status}${message}`);
    process.exit(1);
  });
