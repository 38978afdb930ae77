// The official openai npm package against the engine daemon: models, FIM, a streamed FIM,
// and an error. Prints one JSON object for tests/engine/test_openai_sdk.py to check.
import OpenAI from "openai";

const client = new OpenAI({ baseURL: process.env.DAEMON_URL, apiKey: process.env.DAEMON_TOKEN, maxRetries: 0 });
const body = { model: "mercury-edit-2", prompt: "def fibonacci(n):\n    ", suffix: "\n", max_tokens: 48 };

const models = (await client.models.list()).data.map((m) => m.id);
const whole = await client.completions.create(body);
const chunks = [];
for await (const chunk of await client.completions.create({ ...body, stream: true })) {
  if (chunk.choices[0].text) chunks.push(chunk.choices[0].text);
}
let error = null;
try {
  await client.completions.create({ ...body, max_tokens: 0 });
} catch (e) {
  error = { name: e.constructor.name, status: e.status, param: e.param, message: e.message };
}
console.log(JSON.stringify({ models, text: whole.choices[0].text, tokens: whole.usage.completion_tokens, chunks, error }));
