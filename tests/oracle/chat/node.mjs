// The JavaScript reader of the chat-request oracle: each line of stdin is
// a base64 request body, read as Express's json() reads one (UTF-8, a
// byte-order mark dropped, JSON.parse: the last duplicate wins), then its
// fields as JavaScript servers test them (truthiness, Number()). One JSON
// line out each.
import { createInterface } from "node:readline";

const rl = createInterface({ input: process.stdin });
for await (const line of rl) {
  let reading;
  try {
    const text = new TextDecoder("utf-8").decode(Buffer.from(line, "base64"));
    const body = JSON.parse(text);
    if (body === null || typeof body !== "object" || Array.isArray(body)) throw new Error("not an object");
    reading = {
      stream: Boolean(body.stream),
      include_usage: Boolean(body.stream_options && body.stream_options.include_usage),
    };
    const raw = body.max_completion_tokens ?? body.max_tokens;
    if (raw !== undefined && raw !== null && Number.isFinite(Number(raw))) {
      reading.ceiling = Number(raw);
    }
  } catch (e) {
    reading = { error: String(e.message || e) };
  }
  process.stdout.write(JSON.stringify(reading) + "\n");
}
