// openai (Node): client.chat.completions.create, default maxRetries (2). Node.js before 22.21
// has a global fetch that ignores HTTP_PROXY (Node 22.21+ honours NODE_USE_ENV_PROXY=1), so
// undici's EnvHttpProxyAgent is made the global dispatcher, which the global fetch the SDK
// uses by default goes through. The SDK sends a POST whatever METHOD is.
//
// Usage: node openai.mjs METHOD URL. Exits 0 on success, 1 otherwise.
import OpenAI from "openai";
import { EnvHttpProxyAgent, setGlobalDispatcher } from "undici";

setGlobalDispatcher(new EnvHttpProxyAgent());
const client = new OpenAI({ baseURL: process.argv[3], apiKey: "sk-matrix" });
try {
  await client.chat.completions.create({
    model: "gpt-4o-mini",
    messages: [{ role: "user", content: "hi" }],
  });
} catch (error) {
  console.error(String(error));
  process.exit(1);
}
