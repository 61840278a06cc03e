package redisbackend

import "github.com/redis/go-redis/v9"

// decideLua is gcra.DecideComposite as one atomic Redis script.
//
// KEYS: the limit keys, all in one slot.
// ARGV: cost, now (microseconds; 0 means read the server's TIME), then
// interval and burst for each key in order.
//
// Reply: {now, allowed, then six integers per key: allowed, too_costly, tat,
// retry_after, remaining, reset_after}. Every value is an integer.
//
// Lua numbers are doubles. Go keeps every input below 2^52 and every span
// below 2^50, so sums stay below 2^53 and are exact; the script re-checks
// that bound before it trusts a sum. Values written back to Redis go through
// string.format('%d') so they are never printed in exponent form.
const decideLua = `
local LIMIT = 9007199254740992 -- 2^53: beyond it doubles are not integers

-- idiv is floor(a / b) for non-negative integers, corrected for rounding.
local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end

-- remaining is how many whole units fit before the key at base is full.
local function remaining(base, now, T, B)
  local ahead = base - now
  if ahead >= T * B then return 0 end
  return idiv(T * B - ahead, T)
end

local cost = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
-- With the server's own clock the expiry is exact. A caller's explicit now
-- may lag or lead Redis's clock, so its keys live ExpiryGrace longer: a TAT
-- that outlives its time decides exactly like a missing key, while one that
-- expired early would hand out a burst too soon.
local grace = 1000
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  grace = 0
end

local n = #KEYS
local lim, tats, res = {}, {}, {}
local all = true
for i = 1, n do
  local T, B = tonumber(ARGV[1 + 2 * i]), tonumber(ARGV[2 + 2 * i])
  lim[i] = {T, B}
  local raw = redis.call('GET', KEYS[i])
  local tat = 0
  if raw then
    tat = string.match(raw, '^%d+$') and tonumber(raw)
    if not tat then return redis.error_reply('redisbackend: key ' .. KEYS[i] .. ' holds a non-integer TAT') end
  end
  tats[i] = tat
  local base = math.max(tat, now)
  if base + T * B >= LIMIT then return redis.error_reply('redisbackend: time out of exact range') end
  local r
  if cost > B then
    r = {0, 1, tat, 0, remaining(base, now, T, B), base - now}
  else
    local new = base + T * cost
    local allow_at = new - T * B
    if allow_at > now then
      r = {0, 0, tat, allow_at - now, remaining(base, now, T, B), base - now}
    else
      r = {1, 0, new, 0, remaining(new, now, T, B), new - now}
    end
  end
  res[i] = r
  if r[1] == 0 then all = false end
end

if all then
  for i = 1, n do
    local new = res[i][3]
    local px = idiv(new - now + 999, 1000) + 1 + grace
    redis.call('SET', KEYS[i], string.format('%d', new), 'PX', string.format('%d', px))
  end
else
  -- Nothing is consumed: limits that alone would admit report their state
  -- as it stands.
  for i = 1, n do
    if res[i][1] == 1 then
      local base = math.max(tats[i], now)
      res[i] = {1, 0, tats[i], 0, remaining(base, now, lim[i][1], lim[i][2]), base - now}
    end
  end
end

local out = {now, all and 1 or 0}
for i = 1, n do
  for j = 1, 6 do out[#out + 1] = res[i][j] end
end
return out
`

// replyHead and replyPerKey describe the reply layout of decideLua.
const (
	replyHead   = 2
	replyPerKey = 6
)

// newDecideScript returns the script handle; go-redis sends EVALSHA and
// falls back to EVAL when the server answers NOSCRIPT.
func newDecideScript() *redis.Script { return redis.NewScript(decideLua) }
