-- wrk script for bench/run.py's variants 60-62: requests take turns among N
-- users (`wrk ... URL -- N`), each named in X-User-Id, which the
-- configuration trusts as the caller's identity: N callers tracked.
local n = 10
local i = 0

function init(args)
  n = tonumber(args[1]) or n
end

request = function()
  i = (i + 1) % n
  return wrk.format("GET", "/", { ["X-User-Id"] = "user-" .. i })
end
