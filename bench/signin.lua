-- wrk script for bench/signin.py: every request is a sign-in, POST /up/login
-- with a JSON body {"username": ..., "password": ...} naming a different
-- account each time (bench-1, bench-2, ..., wrapping after SIGNIN_ACCOUNTS),
-- and the same account in the header X-Login. Every variant gets these same
-- bytes: variant B reads the account from the body, C from the header, the
-- others read neither.
local accounts = tonumber(os.getenv("SIGNIN_ACCOUNTS") or "100000")
local n = 0

request = function()
  n = n + 1
  local user = "bench-" .. (n % accounts)
  local body = '{"username":"' .. user .. '","password":"correct horse battery staple"}'
  return wrk.format("POST", "/up/login",
    { ["Content-Type"] = "application/json", ["X-Login"] = user }, body)
end
