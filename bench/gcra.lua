-- gcra.lua: CL.THROTTLE's GCRA (docs/commands.md#cl-throttle-algorithm) as a
-- Redis Lua script, the baseline bench/run.sh measures cellserver against
-- ("Redis + Lua GCRA").
--
--   EVALSHA <sha> 1 <key> <max_burst> <count> <period> [<quantity>]
--
-- It does the work CL.THROTTLE does: one TIME, one GET, the arithmetic, one
-- SET ... PX when the request is allowed, and a reply of five integers
-- [limited, limit, remaining, retry_after, reset_after].
--
-- Differences from redis-cell, acceptable for a baseline: Lua 5.1 numbers are
-- doubles, so times are whole microseconds (Unix ns would lose precision
-- above 2^53), the stored TAT is in µs rather than ns, the expiry is at least
-- 1 ms (SET PX 0 is an error in Redis), and argument errors are plain.

local max_burst = tonumber(ARGV[1])
local count = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local quantity = tonumber(ARGV[4] or '1')
if not (max_burst and count and period and quantity) then
  return redis.error_reply('ERR arguments must be integers')
end

-- trunc rounds toward zero, as Rust's `as i64` does.
local function trunc(x)
  if x >= 0 then return math.floor(x) end
  return math.ceil(x)
end

-- secs replies a duration in µs as redis-cell does: whole seconds, plus one
-- only when the sub-second part is at least 1 ms.
local function secs(d)
  if d < 0 then return trunc(d / 1e6) end
  local s = math.floor(d / 1e6)
  if d - s * 1e6 >= 1000 then s = s + 1 end
  return s
end

local T = trunc(period * 1e6 / count)        -- emission interval, µs
if not (T > 0 and T < math.huge) then        -- count 0 gives inf, both 0 NaN
  return redis.error_reply('Cell error: Store error: Zero rates are not supported')
end
local limit = max_burst + 1
local tau = T * limit                          -- delay tolerance
local inc = T * quantity

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local stored = redis.call('GET', KEYS[1])
local tat = now
if stored then
  tat = tonumber(stored)
  if not tat then return redis.error_reply('WRONGTYPE stored value is not a TAT') end
end

local new_tat = math.max(tat, now) + inc
local diff = now - (new_tat - tau)
local limited, retry, ttl = 0, -1, 0
if diff < 0 then
  limited = 1
  if inc <= tau then retry = secs(-diff) end
  ttl = tat - now
else
  if new_tat < now then                        -- over-refund: a full bucket
    redis.call('DEL', KEYS[1])
    return {0, limit, limit, -1, 0}
  end
  ttl = new_tat - now
  redis.call('SET', KEYS[1], string.format('%d', new_tat),
    'PX', math.max(1, math.floor(ttl / 1000)))
end

local remaining = 0
local next = tau - ttl
if next > -T then remaining = trunc(next / T) end
return {limited, limit, remaining, retry, secs(ttl)}
