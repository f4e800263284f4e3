// The Vercel AI SDK (`ai` + `@ai-sdk/openai`), unchanged, with its provider-executed `openai.tools.fileSearch`:
// one `generateText` and one `streamText` over a vector store the test filled. The server runs the search; the
// SDK reports the call's queries and results as a tool result, each file found as a document source, and the
// answer. Usage: node ai_sdk_file_search.mjs <base_url>, with the plan on stdin:
// {"model": ..., "vectorStoreId": ..., "filters": ..., "prompt": ...}. Prints one JSON object.
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, streamText } from "ai";
import { readFileSync } from "node:fs";

const baseURL = process.argv[2];
const plan = JSON.parse(readFileSync(0, "utf8"));
const sent = [];

async function recordingFetch(url, init) {
  sent.push(JSON.parse(init.body));
  return fetch(url, init);
}

const openai = createOpenAI({ baseURL, apiKey: "unused", fetch: recordingFetch });

function options() {
  return {
    model: openai.responses(plan.model),
    prompt: plan.prompt,
    tools: {
      file_search: openai.tools.fileSearch({
        vectorStoreIds: [plan.vectorStoreId],
        maxNumResults: 3,
        filters: plan.filters,
      }),
    },
    providerOptions: { openai: { include: ["file_search_call.results"] } },
    maxRetries: 0,
  };
}

function shown(content) {
  return content.map((p) => {
    if (p.type === "tool-result") return { type: p.type, toolName: p.toolName, output: p.output ?? p.result };
    if (p.type === "tool-call") return { type: p.type, toolName: p.toolName, providerExecuted: p.providerExecuted };
    if (p.type === "source")
      return { type: p.type, sourceType: p.sourceType, filename: p.filename, meta: p.providerMetadata };
    if (p.type === "text") return { type: p.type, text: p.text };
    return { type: p.type };
  });
}

const generated = await generateText(options());
const streamed = streamText(options());
const parts = [];
for await (const part of streamed.fullStream) {
  if (part.type === "error") throw part.error;
  parts.push(part);
}
console.log(
  JSON.stringify({
    node: process.version,
    sent,
    generated: { content: shown(generated.content), text: generated.text, sources: generated.sources },
    streamed: {
      partTypes: parts.map((p) => p.type),
      parts: shown(parts.filter((p) => p.type !== "text-delta")),
      text: await streamed.text,
      sources: await streamed.sources,
    },
  }),
);
