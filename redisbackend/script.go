package redisbackend

import "github.com/redis/go-redis/v9"

// decideLua is gcra.DecideComposite as one atomic Redis script.
//
// KEYS: the limit keys, all in one slot.
// ARGV: cost, now as whole microseconds and the nanoseconds past them (0, 0
// means read the server's TIME), then interval (ns) and burst for each key.
//
// Reply: {now_us, now_ns, allowed, then seven integers per key: allowed,
// too_costly, tat_us, tat_ns, retry_after, remaining, reset_after}. Times
// are split into whole microseconds and the 0..999 nanoseconds past them;
// durations are nanoseconds.
//
// A stored TAT is "<us>" or "<us>.<nnn>" (see formatTAT), so every TAT
// written before nanosecond TATs reads as the same instant. Lua numbers are
// doubles, exact integers below 2^53: absolute instants stay split in two,
// and the script computes only on how far a key is ahead of now, in
// nanoseconds, which Go bounds by MaxSpan (2^52 ns); the script re-checks
// that bound before it trusts a sum. Values written back go through
// string.format('%d') so they are never printed in exponent form.
const decideLua = parseTATLua + `
local LIMIT = 9007199254740992 -- 2^53: beyond it doubles are not integers

-- idiv is floor(a / b) for non-negative integers, corrected for rounding.
local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end

-- remaining is how many whole units fit before a key ahead by ahead is full.
local function remaining(ahead, T, B)
  if ahead >= T * B then return 0 end
  return idiv(T * B - ahead, T)
end

local cost = tonumber(ARGV[1])
local now_us, now_ns = tonumber(ARGV[2]), tonumber(ARGV[3])
-- With the server's own clock the expiry is exact. A caller's explicit now
-- may lag or lead Redis's clock, so its keys live ExpiryGrace longer: a TAT
-- that outlives its time decides exactly like a missing key, while one that
-- expired early would hand out a burst too soon.
local grace = 1000
if now_us == 0 and now_ns == 0 then
  local t = redis.call('TIME')
  now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  grace = 0
end

local n = #KEYS
local lim, tats, aheads, res = {}, {}, {}, {}
local all = true
for i = 1, n do
  local T, B = tonumber(ARGV[2 + 2 * i]), tonumber(ARGV[3 + 2 * i])
  lim[i] = {T, B}
  local raw = redis.call('GET', KEYS[i])
  local tat_us, tat_ns = 0, 0
  if raw then
    tat_us, tat_ns = parse(raw)
    if not tat_us then return redis.error_reply('redisbackend: key ' .. KEYS[i] .. ' holds ' .. raw .. ', not a TAT') end
  end
  tats[i] = {tat_us, tat_ns}
  local d = tat_us - now_us
  local ahead = 0
  if d > 0 or (d == 0 and tat_ns > now_ns) then
    if d >= LIMIT / 1000 then return redis.error_reply('redisbackend: time out of exact range') end
    ahead = d * 1000 + tat_ns - now_ns
  end
  if ahead + T * B >= LIMIT then return redis.error_reply('redisbackend: time out of exact range') end
  aheads[i] = ahead
  local r
  if cost > B then
    r = {0, 1, tat_us, tat_ns, 0, remaining(ahead, T, B), ahead}
  else
    local room = T * B - T * cost
    if ahead > room then
      r = {0, 0, tat_us, tat_ns, ahead - room, remaining(ahead, T, B), ahead}
    else
      local new = ahead + T * cost
      local total = now_ns + new
      local carry = idiv(total, 1000)
      r = {1, 0, now_us + carry, total - carry * 1000, 0, remaining(new, T, B), new}
    end
  end
  res[i] = r
  if r[1] == 0 then all = false end
end

if all then
  for i = 1, n do
    local r = res[i]
    local val = string.format('%d', r[3])
    if r[4] ~= 0 then val = val .. string.format('.%03d', r[4]) end
    local px = idiv(r[7] + 999999, 1000000) + 1 + grace
    redis.call('SET', KEYS[i], val, 'PX', string.format('%d', px))
  end
else
  -- Nothing is consumed: limits that alone would admit report their state
  -- as it stands.
  for i = 1, n do
    if res[i][1] == 1 then
      local a = aheads[i]
      res[i] = {1, 0, tats[i][1], tats[i][2], 0, remaining(a, lim[i][1], lim[i][2]), a}
    end
  end
end

local out = {now_us, now_ns, all and 1 or 0}
for i = 1, n do
  for j = 1, 7 do out[#out + 1] = res[i][j] end
end
return out
`

// parseTATLua defines the Lua function parse, which splits a stored TAT
// ("<us>" or "<us>.<nnn>", see formatTAT) into whole microseconds and the
// nanoseconds past them; nil when raw is neither. Both scripts start with it.
const parseTATLua = `
-- parse splits a stored TAT into microseconds and nanoseconds past them.
local function parse(raw)
  local us = string.match(raw, '^(%d+)$')
  if us then return tonumber(us), 0 end
  local ns
  us, ns = string.match(raw, '^(%d+)%.(%d%d%d)$')
  if us then return tonumber(us), tonumber(ns) end
  return nil
end
`

// replyHead and replyPerKey describe the reply layout of decideLua.
const (
	replyHead   = 3
	replyPerKey = 7
)

// newDecideScript returns the script handle; go-redis sends EVALSHA and
// falls back to EVAL when the server answers NOSCRIPT.
func newDecideScript() *redis.Script { return redis.NewScript(decideLua) }
