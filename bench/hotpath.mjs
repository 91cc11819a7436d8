// The filter's own wasm work per request, apart from Envoy: loads a module
// into Node's V8 behind a fake proxy-wasm host (shared data, headers and
// properties in JS maps, a fake clock), drives N requests through it and
// prints ns per request. The host calls here cost next to nothing, so the
// figure is the module's own code plus V8's call boundaries; compare builds
// with it, and run with `node --cpu-prof` on an unstripped build (see
// BENCHMARKS.md) to see which functions take the time.
//
//   node bench/hotpath.mjs MODULE.wasm CONFIG.json [requests]
import { readFileSync } from "node:fs";
import { WASI } from "node:wasi";

const [file, configFile, n = "200000"] = process.argv.slice(2);
const requests = Number(n);
const config = readFileSync(configFile);
const enc = new TextEncoder();
const dec = new TextDecoder();

let mem;
let exports;
// Views over the module's memory, renewed only when it grows.
let buf, bytes, view;
const u8 = () => (mem.buffer === buf ? bytes : ((buf = mem.buffer), (view = new DataView(buf)), (bytes = new Uint8Array(buf))));
const dv = () => (u8(), view);
const str = (p, l) => String.fromCharCode.apply(null, u8().subarray(p, p + l)); // names and keys are ASCII
function give(bytes, retPtr, retSize) {
  const p = exports.proxy_on_memory_allocate(bytes.length);
  u8().set(bytes, p);
  dv().setUint32(retPtr, p, true);
  dv().setUint32(retSize, bytes.length, true);
  return 0;
}

const shared = new Map(); // key -> {value, cas}
let casCounter = 1;
let nowNs = 1_700_000_000_000n * 1_000_000n;
const requestHeaders = new Map([[":path", "/"], [":method", "GET"], [":authority", "bench"]]);
const counts = {};
const count = (name) => { counts[name] = (counts[name] || 0) + 1; };
const address = enc.encode("127.0.0.1:40000");

const env = {
  proxy_log: (level, p, l) => { if (level >= 3) console.error(str(p, l)); return 0; },
  proxy_get_log_level: (ret) => { dv().setUint32(ret, 2, true); return 0; },
  proxy_get_current_time_nanoseconds: (ret) => { count("time"); dv().setBigUint64(ret, nowNs, true); return 0; },
  proxy_set_tick_period_milliseconds: () => 0,
  proxy_define_metric: (_t, _p, _l, ret) => { dv().setUint32(ret, 1, true); return 0; },
  proxy_increment_metric: () => 0,
  proxy_record_metric: () => 0,
  proxy_get_metric: () => 1,
  proxy_set_effective_context: () => 0,
  proxy_done: () => 0,
  proxy_get_buffer_bytes: (type, _s, _m, ret, retSize) => {
    if (type === 7) return give(config, ret, retSize);
    if (type === 6) return give(new Uint8Array(0), ret, retSize);
    return 1;
  },
  proxy_get_property: (p, l, ret, retSize) => {
    count("property");
    const path = str(p, l);
    if (path.startsWith("source\0address")) return give(address, ret, retSize);
    return 1;
  },
  proxy_get_header_map_value: (map, p, l, ret, retSize) => {
    count("header read");
    const v = map === 0 ? requestHeaders.get(str(p, l)) : undefined;
    return v === undefined ? 1 : give(enc.encode(v), ret, retSize);
  },
  // Header writes are counted, not kept: the module's work is the point.
  proxy_replace_header_map_value: () => { count("header write"); return 0; },
  proxy_add_header_map_value: () => { count("header write"); return 0; },
  proxy_send_local_response: () => { count("local reply"); return 0; },
  proxy_get_shared_data: (kp, kl, ret, retSize, retCas) => {
    count("shared get");
    const e = shared.get(str(kp, kl));
    if (!e) return 1;
    give(e.value, ret, retSize);
    dv().setUint32(retCas, e.cas, true);
    return 0;
  },
  proxy_set_shared_data: (kp, kl, vp, vl, cas) => {
    count("shared set");
    const key = str(kp, kl);
    const e = shared.get(key);
    if (cas !== 0 && e && e.cas !== cas) return 8;
    shared.set(key, { value: u8().slice(vp, vp + vl), cas: casCounter++ });
    return 0;
  },
};
const imports = new Proxy(env, {
  get: (t, name) => t[name] ?? (() => { throw new Error(`host call ${String(name)} not faked`); }),
});

const wasi = new WASI({ version: "preview1", args: [], env: {}, returnOnExit: true });
const module = await WebAssembly.compile(readFileSync(file));
const instance = await WebAssembly.instantiate(module, { env: imports, ...wasi.getImportObject() });
exports = instance.exports;
mem = exports.memory;
wasi.initialize(instance);

const ROOT = 1;
exports.proxy_on_context_create(ROOT, 0);
if (!exports.proxy_on_vm_start(ROOT, 0)) throw new Error("vm start failed");
if (!exports.proxy_on_configure(ROOT, config.length)) throw new Error("configure failed");

function request(id) {
  exports.proxy_on_context_create(id, ROOT);
  exports.proxy_on_request_headers(id, 3, 1);
  exports.proxy_on_response_headers(id, 3, 1);
  exports.proxy_on_log(id);
  exports.proxy_on_done(id);
  exports.proxy_on_delete(id);
}

let id = 2;
const run = (k) => {
  for (let i = 0; i < k; i++) {
    nowNs += 30_000n; // 30 µs apart
    request(id++);
  }
};
run(Math.min(requests, 20_000)); // warm-up: V8 compiles the module's hot functions
for (const k of Object.keys(counts)) delete counts[k];
const t0 = process.hrtime.bigint();
run(requests);
const ns = Number(process.hrtime.bigint() - t0) / requests;
const perRequest = Object.entries(counts).map(([k, v]) => `${k} ${(v / requests).toFixed(2)}`).join(", ");
console.log(`${ns.toFixed(0)} ns/request; host calls per request: ${perRequest}`);
