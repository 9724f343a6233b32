// Reads one assistant message with every kind of part through the AI SDK's own transports and prints it, as JSON.
//
// node tests/support/chat_parts_client.mjs MODULES JOB: MODULES is the node_modules folder holding ai@6 and
// @workflow/ai@6; JOB is JSON: {transport: "default" | "workflow", api, chatId, body, messages, abortAt, rewrite}.
// messages (default: one user message) go through the transport's sendMessages and every chunk through the SDK's
// readUIMessageStream; when the last message is the assistant's (its tool outputs sent back), the stream goes
// on with it, as useChat does.  abortAt: [type, n] aborts the request after the n-th chunk of that type, then
// reconnectToStream reads the message again.  rewrite: [from, to] sends every GET to another server.  Prints
// {chunks: [types, per read], messages: [the message each read assembled], errors, requests, hosts, runId}.
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [modules, jobText] = process.argv.slice(2);
const job = JSON.parse(jobText);
const ai = await import(pathToFileURL(path.join(modules, 'ai', 'dist', 'index.mjs')).href);
const workflow = await import(pathToFileURL(path.join(modules, '@workflow', 'ai', 'dist', 'index.js')).href);

const seen = { requests: [], hosts: [], chunks: [], messages: [], errors: [], runId: null };

async function recordingFetch(url, init = {}) {
  const method = init.method ?? 'GET';
  let target = String(url);
  if (job.rewrite && method === 'GET') target = target.replace(job.rewrite[0], job.rewrite[1]);
  const response = await fetch(target, init);
  seen.requests.push([method, target.replace(/^https?:\/\/[^/]+/, ''), response.status]);
  seen.hosts.push(new URL(target).origin);
  if (method === 'POST') seen.runId = response.headers.get('x-workflow-run-id');
  return response;
}

const transport = job.transport === 'workflow'
  ? new workflow.WorkflowChatTransport({ api: job.api, fetch: recordingFetch, maxConsecutiveErrors: 3 })
  : new ai.DefaultChatTransport({ api: job.api, fetch: recordingFetch, body: job.body ?? {} });
const messages = job.messages ?? [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Weather in Paris?' }] }];
const last = messages[messages.length - 1];

async function read(stream, controller) {
  const types = [];
  seen.chunks.push(types);
  let counted = 0;
  const tapped = stream.pipeThrough(new TransformStream({
    transform(chunk, out) {
      types.push(chunk.type);
      out.enqueue(chunk);
      if (controller && job.abortAt && chunk.type === job.abortAt[0] && ++counted === job.abortAt[1]) controller.abort();
    },
  }));
  let message = null;
  try {
    const going = last.role === 'assistant' ? structuredClone(last) : undefined;
    for await (const m of ai.readUIMessageStream({ stream: tapped, message: going, terminateOnError: true,
                                                    onError: (e) => seen.errors.push(e.message) })) {
      message = m;
    }
  } catch (error) {
    if (error.name !== 'AbortError') seen.errors.push(`${error.name}: ${error.message}`);
  }
  seen.messages.push(message);
}

try {
  const controller = new AbortController();
  const stream = await transport.sendMessages({
    chatId: job.chatId, messages, trigger: 'submit-message', messageId: undefined,
    abortSignal: controller.signal, body: job.body ?? {},
  });
  await read(stream, job.abortAt ? controller : null);
  if (job.abortAt) {
    const again = await transport.reconnectToStream({ chatId: job.chatId });
    if (again !== null) await read(again, null);
  }
} catch (error) {
  seen.errors.push(`${error.name}: ${error.message}`);
}
console.log(JSON.stringify(seen));
