-- wrk script for bench/flood.py: every request carries a different
-- X-Forwarded-For address (10.x.y.z, counting up from 10.0.0.1), so Envoy,
-- which trusts one hop (use_remote_address + xff_num_trusted_hops: 1), sees
-- each request coming from a distinct client. The thread stops once FLOOD_N
-- responses have arrived (the few requests still in flight are abandoned;
-- wrk itself runs until bench/flood.py sends it SIGINT).
local limit = tonumber(os.getenv("FLOOD_N") or "1000000")
local sent = 0
local answered = 0

request = function()
  sent = sent + 1
  local a = sent
  local ip = string.format("10.%d.%d.%d", math.floor(a / 65536) % 256, math.floor(a / 256) % 256, a % 256)
  return wrk.format("GET", "/", { ["X-Forwarded-For"] = ip })
end

response = function(status, headers, body)
  answered = answered + 1
  if answered >= limit then
    wrk.thread:stop()
  end
end
