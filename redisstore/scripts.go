package redisstore

import "github.com/redis/go-redis/v9"

// prelude is countScript's, which takes one key (KEYS[1]) and ARGV[1] =
// "0" hit, "1" peek, "2" hit that must be denied; ARGV[2] = "1" to read the
// time from Redis TIME, else ARGV[3] (Unix ms) and ARGV[4] (ns within that
// ms) are the caller's. fixedScript and drainScript, which take a run of
// keys, read the time the same way from ARGV[1] to ARGV[3]. Every script
// returns the time it decided at as its first two values, so that Go turns
// the script's whole milliseconds, slots and (ns, fraction) pairs into
// exact durations.
//
// Lua numbers are doubles, exact for integers below 2^53. The scripts only
// ever hold integers below that: Unix milliseconds (about 2^41), slot
// numbers, counts of at most a validated Limit (below 2^53), nanosecond
// spans below [MaxSpan] (2^52 ns) and fractions below a Limit (below 2^52).
// A fixed window's count is Redis's own 64-bit HINCRBY, saturated at
// MaxInt64, and reaches Go as a string from 2^53 on.
const prelude = `
local function fmt(x) return string.format('%.0f', x) end
local function now()
  if ARGV[2] == '1' then
    local t = redis.call('TIME')
    local us = tonumber(t[2])
    return tonumber(t[1]) * 1000 + math.floor(us / 1000), (us % 1000) * 1000
  end
  return tonumber(ARGV[3]), tonumber(ARGV[4])
end
-- fdiv returns floor(a/b) for integers a >= 0, b > 0 below 2^53.
local function fdiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end
-- ttl keeps the key for ms more and a grace: 1s with Redis's TIME, a
-- minute with the caller's time, whose clock need not run with Redis's.
local function ttl(ms)
  local grace = 60000
  if ARGV[2] == '1' then grace = 1000 end
  redis.call('PEXPIRE', KEYS[1], fmt(math.max(1, math.ceil(ms)) + grace))
end
`

// fixedScript is the fixed window, for a run of checks as drainScript is
// for buckets: one call decides the run in order (with Redis Cluster or a
// Ring a run is one check). The state of a key is a hash of the window's
// number b and its count c. A hit counts with HINCRBY, denied ones too as
// the original does, saturating at MaxInt64; the key's TTL is set when a
// window starts (its end and the grace) and HINCRBY keeps it, so a hit in
// a window already started writes nothing else.
//
// KEYS are the run's keys. ARGV[1] to ARGV[3] are the time: "1" to read
// it from Redis TIME, else "0" and the caller's Unix ms and ns within that
// ms; then three values for each key: the op ("0" hit, "1" peek), the
// Period in ms, N. Returns M, r, then for each key b, c (an integer, or a
// string when it is 2^53 or more, which a Lua number cannot hold), and 1
// if b is the current window or a later one (0 for a peek of none yet, -1
// for a key that failed); then a key's position and its error reply for
// each key that failed alone (one holding another type, a write that Redis
// refused).
//
// A lone hit (a run of one hit: a lone caller's, and every hit on Redis
// Cluster) is sent shorter, and takes a path of its own, which decides as
// the loop does: ARGV[1] the Period in ms, ARGV[2] N, and ARGV[3] and
// ARGV[4] the caller's time (absent: Redis TIME); fewer than six ARGV tell
// it from a run. It returns c and the ns from the time it decided at to
// the window's end (below 2^53; else c, that in whole ms and r, which Go
// puts together), and a key that fails gets its error as the call's own
// error reply, as a call of its own would. The client writes 6 arguments
// and reads 2 numbers, not 10 and 5: each costs go-redis a few hundred
// instructions, and a number past 255 an allocation too.
const fixedScript = `
local M, r, grace
local lone = #ARGV < 6
local at = 2 -- the caller's time: ARGV[at], ARGV[at + 1]
if lone then at = 3 end
if (lone and not ARGV[3]) or (not lone and ARGV[1] == '1') then
  local t = redis.call('TIME')
  local us = tonumber(t[2])
  M, r, grace = tonumber(t[1]) * 1000 + math.floor(us / 1000), (us % 1000) * 1000, 1000
else
  M, r, grace = tonumber(ARGV[at]), tonumber(ARGV[at + 1]), 60000
end
local floor, ceil, max = math.floor, math.ceil, math.max
-- failed returns the error of a redis.pcall's reply, or nil.
local function failed(w)
  if type(w) == 'table' then return w.err end
end
if lone then
  local i = 1
  local key = KEYS[i]
  local P, N = tonumber(ARGV[1]), ARGV[2]
  local cur = floor(M / P)
  if cur * P > M then cur = cur - 1 elseif (cur + 1) * P <= M then cur = cur + 1 end
  local v = redis.pcall('HMGET', key, 'b', 'c')
  if v.err then return redis.error_reply(v.err) end
  local b = tonumber(v[1] or '')
  if not b or b < cur then
    b = cur
    local err = failed(redis.pcall('HSET', key, 'b', string.format('%.0f', b), 'c', '0'))
    if not err then err = failed(redis.pcall('PEXPIRE', key, max(1, ceil((b + 1) * P - M)) + grace)) end
    if err then return redis.error_reply(err) end
  end
  local c = redis.pcall('HINCRBY', key, 'c', N)
  if failed(c) then
    c = '9223372036854775807'
    local err = failed(redis.pcall('HSET', key, 'c', c))
    if err then return redis.error_reply(err) end
  elseif c >= 9007199254740992 then
    c = redis.call('HGET', key, 'c')
  end
  local rest = (b + 1) * P - M
  local left = rest * 1000000 - r
  if left < 9007199254740992 then return {c, left} end
  return {c, rest, r}
end
local n = #KEYS
local res, errs = {M, r}, {}
for i = 1, n do
  local key = KEYS[i]
  local a = 3 + (i - 1) * 3
  local op, P, N = ARGV[a + 1], tonumber(ARGV[a + 2]), ARGV[a + 3]
  -- floor(M/P), exactly: M and P are integers below 2^53.
  local cur = floor(M / P)
  if cur * P > M then cur = cur - 1 elseif (cur + 1) * P <= M then cur = cur + 1 end
  local b, c, on, err = nil, '0', 0, nil
  local v = redis.pcall('HMGET', key, 'b', 'c')
  err = v.err
  if not err then
    b = tonumber(v[1] or '')
    if b and b >= cur then c, on = v[2] or '0', 1 else b = nil end
  end
  if not err and op ~= '1' then
    if not b then
      b = cur
      err = failed(redis.pcall('HSET', key, 'b', string.format('%.0f', b), 'c', '0'))
      if not err then err = failed(redis.pcall('PEXPIRE', key, max(1, ceil((b + 1) * P - M)) + grace)) end
    end
    if not err then
      c = redis.pcall('HINCRBY', key, 'c', N)
      if failed(c) then
        -- The count would pass MaxInt64: it stays there.
        c = '9223372036854775807'
        err = failed(redis.pcall('HSET', key, 'c', c))
      elseif c >= 9007199254740992 then
        c = redis.call('HGET', key, 'c')
      end
      on = 1
    end
  end
  if err then
    b, c, on = 0, 0, -1
    errs[#errs + 1] = i
    errs[#errs + 1] = err
  end
  res[#res + 1] = b or cur
  res[#res + 1] = c
  res[#res + 1] = on
end
for _, e in ipairs(errs) do res[#res + 1] = e end
return res
`

// countScript is shared by the sliding window and the sliding log: a hash of
// slot -> count of allowed hits. ARGV[5] = "w" (sliding window) or "l"
// (log), ARGV[6] = Period in ms, ARGV[7] = Limit, ARGV[8] = N. Returns M, r,
// alive, newest slot, the slot whose death lets N more in (or -1), allowed,
// count after.
const countScript = prelude + `
local M, r = now()
local P = tonumber(ARGV[6])
local limit, n = tonumber(ARGV[7]), tonumber(ARGV[8])
local cur, W, slotms
if ARGV[5] == 'l' then
  cur, W, slotms = M, P, 1
else
  -- floor(now*60/Period) with now = M ms + r ns, exactly.
  local A = M * 60
  local q = fdiv(A, P)
  local rem = A - q * P
  q = q + fdiv(rem * 1000000 + 60 * r, P * 1000000)
  cur, W, slotms = q, 60, P / 60
end
local raw = redis.call('HGETALL', KEYS[1])
local slots = {}
for i = 1, #raw, 2 do slots[#slots + 1] = {tonumber(raw[i]), tonumber(raw[i + 1])} end
table.sort(slots, function(a, b) return a[1] < b[1] end)
local oldest, alive, newest = cur - W, 0, nil
for _, s in ipairs(slots) do
  if s[1] >= oldest then alive = alive + s[2] end
  newest = s[1]
end
if alive == 0 then newest = nil end
local retry = -1
if alive > limit - n then
  local left = alive
  for _, s in ipairs(slots) do
    if s[1] >= oldest then
      left = left - s[2]
      if left <= limit - n then retry = s[1]; break end
    end
  end
end
if ARGV[1] ~= '0' or n > limit or alive > limit - n then
  return {M, r, fmt(alive), newest or -1, retry, 0, fmt(alive)}
end
for _, s in ipairs(slots) do
  if s[1] < oldest then redis.call('HDEL', KEYS[1], fmt(s[1])) end
end
local at = cur
if newest and newest > cur then at = newest end
redis.call('HINCRBY', KEYS[1], fmt(at), fmt(n))
ttl((at - cur + W + 2) * slotms)
return {M, r, fmt(alive), at, -1, 1, fmt(alive + n)}
`

// drainScript is GCRA, token bucket and leaky bucket: one script call
// decides a run of bucket checks in order, so that Redis parses one
// command, sets up one script call and reads the time once for the run,
// and the client reads one reply. On one server a run is every consecutive
// bucket check of a batch; with Redis Cluster or a Ring, whose keys of one
// call must share a slot, it is one check. A later check of the run on the
// same key as an earlier one sees its change. A run of one key, the lone
// caller's, takes a path of its own, without the loop, the MGET and the
// tables a longer run needs (about a fifth less Redis time); both paths
// decide with bucketStep, the one copy of the arithmetic, and are one
// script, so that Redis has both or neither (see reload).
//
// The state of a key is one string of five doubles (struct.pack 'ddddd',
// 40 bytes): the time F the bucket is empty (f Unix ms, fr ns within, q
// fraction of 1/l ns), the Limit l it drains at and the key's expiry E
// (Unix ms). Every one is an integer below 2^53, so a double holds it
// exactly. A run's states are read with one MGET (per 1000 keys; a key MGET
// finds no string under is read alone with GET, so that one of another type
// fails), a lone key's with GET. A check writes its key at most once, with
// SET: KEEPTTL while E is at least the bucket's empty time plus the grace,
// else PX to a new E a grace beyond that (a SET PX, which writes the
// expiry too and is rewritten as PXAT for replication, cost Redis about
// 2 µs more than a SET KEEPTTL in our measurements).
//
// KEYS are the run's keys. ARGV[1] is the run's checks, 48 bytes each: six
// little-endian doubles (struct.pack '<dddddd'), the op (0 hit, 1 peek, 2
// hit that must be denied), the Limit, N*T as ns and fraction, Capacity*T
// as ns and fraction: one argument, read with one struct call a check,
// instead of six strings to make and parse. Without ARGV[2] the script
// reads the time from Redis TIME; else ARGV[2] (Unix ms) and ARGV[3] (ns
// within that ms) are the caller's. Returns, for each key, the backlog
// before the check (ns and fraction, after the clamp and the move to a
// changed Limit), from which Go works out the rest of the decision exactly
// (the backlog a hit would leave is that plus N*T, allowed when it is at
// most Capacity*T, as the script decided); then a key's position and its
// error reply for each key that failed alone: one holding another type, or
// a state that is not a bucket's, or a write that Redis refused (OOM). A
// failed key's state is left as it was. A lone check whose backlog is a
// whole number of ns gets that number alone, not a table.
//
// It is written for Redis's Lua, where every builtin call, table and string
// made costs: the state packed and unpacked by one struct call each,
// numbers given to redis.call as numbers (Redis writes them with %.17g,
// exact below 2^53), MaxSpan (2^52 ns) written in, no closure made, the
// strings of TIME read by Lua's arithmetic, floor and ceil written out. A
// call of one key costs Redis a little less than redis_rate's GCRA script
// (both are TIME, GET and SET; ours keeps the TTL: see docs/redis.md).
const drainScript = `local M, r, grace
local floor = math.floor
local sunpack, pack = struct.unpack, struct.pack
if ARGV[2] then
  M, r, grace = ARGV[2] + 0, ARGV[3] + 0, 60000
else
  -- Lua's arithmetic reads the strings TIME returns as numbers.
  local t = redis.call('TIME')
  local us = t[2] + 0
  local sub = us % 1000
  M, r, grace = t[1] * 1000 + (us - sub) / 1000, sub * 1000, 1000
end
local cap = 4503599627370496
local P = ARGV[1]
local n = #KEYS
if n == 1 then
  local i, seen = 1, nil
  local key = KEYS[i]
  local v, err = redis.pcall('GET', key), nil
  if v and v.err then err, v = v.err, nil end
` + bucketStep + `
  if err then return {0, 0, 1, err} end
  if bq == 0 then return bns end
  return {bns, bq}
end
-- seen is each key's state as the run left it so far.
local got, seen = {}, {}
for lo = 1, n, 1000 do
  local part = redis.call('MGET', unpack(KEYS, lo, math.min(n, lo + 999)))
  for j = 1, #part do got[lo + j - 1] = part[j] end
end
local res, bad = {}, nil
for i = 1, n do
  local key = KEYS[i]
  local v, err = seen[key], nil
  if v == nil then
    v = got[i]
    if not v then
      v = redis.pcall('GET', key)
      if v and v.err then err, v = v.err, nil end
    end
  end
  seen[key] = v
` + bucketStep + `
  res[2 * i - 1], res[2 * i] = bns, bq
  if err then
    bad = bad or {}
    bad[#bad + 1] = i
    bad[#bad + 1] = err
  end
end
if bad then for j = 1, #bad do res[#res + 1] = bad[j] end end
return res
`

// bucketStep decides the check at position i of the run (key, its
// parameters in P) on v, its state (false or nil: none), unless err is
// set already, and leaves bns, bq (its backlog before the check) and err.
// It writes the key at most once: the state a hit that is allowed leaves,
// else the clamped or moved backlog (a peek writes nothing). The backlog
// is read in ns and a fraction of 1/l ns below l; a state written under
// another Limit l0 is moved to l, floor((bns*l0 + bq)/l) with the
// remainder, exactly; a bucket holds at most its capacity under a changed
// Limit, else at most twice its capacity (full, plus at most one capacity
// of debt).
const bucketStep = `
local op, l, ans, aq, fns, fq = sunpack('<dddddd', P, 48 * i - 47)
local bns, bq, changed, E = 0, 0, false, nil
if v and not err then
  if #v ~= 40 then
    err = 'ERR the key holds no bucket state of this layout'
  else
    local fm, fr, fq0, d, e = sunpack('ddddd', v)
    changed, E = d ~= l, e
    if fm > M or (fm == M and (fr > r or (fr == r and fq0 > 0))) then
      if fm - M > cap / 1000000 + 1 then
        bns, bq = cap, 0
      else
        bns, bq = (fm - M) * 1000000 + fr - r, fq0
      end
      if changed then
        -- floor((bns*l0 + bq)/l) and the remainder, for bns below 2^53
        -- and l0, bq, l below 2^52, bit by bit, or cap when it is more.
        local D, l0 = 16777216, d
        local a0, a1, a2 = bns % D, floor(bns / D) % D, floor(bns / D / D)
        local b0, b1, b2 = l0 % D, floor(l0 / D) % D, floor(l0 / D / D)
        local p = {a0 * b0 + bq, a0 * b1 + a1 * b0, a0 * b2 + a1 * b1 + a2 * b0, a1 * b2 + a2 * b1, a2 * b2, 0}
        for j = 1, 5 do
          local carry = floor(p[j] / D)
          p[j] = p[j] - carry * D
          p[j + 1] = p[j + 1] + carry
        end
        local q, rem = 0, 0
        for j = 6, 1, -1 do
          local digit = p[j]
          for bit = 23, 0, -1 do
            rem = rem * 2 + floor(digit / 2 ^ bit) % 2
            q = q * 2
            if rem >= l then rem = rem - l; q = q + 1 end
            if q > cap then break end
          end
          if q > cap then break end
        end
        if q > cap then bns, bq = cap, 0 else bns, bq = q, rem end
      end
    end
  end
end
if not err then
  local mns, mq = fns, fq
  if not changed then
    mns, mq = fns * 2, fq * 2
    if mq >= l then mns, mq = mns + 1, mq - l end
    if mns > cap then mns, mq = cap, 0 end
  end
  local clamped = bns > mns or (bns == mns and bq > mq)
  if clamped then bns, bq = mns, mq end
  local wns, wq, write = bns, bq, op ~= 1 and (clamped or changed and (bns > 0 or bq > 0))
  if op == 0 then
    local nns, nq = bns + ans, bq + aq
    if nq >= l then nns, nq = nns + 1, nq - l end
    if nns < fns or (nns == fns and nq <= fq) then wns, wq, write = nns, nq, true end
  end
  if write then
    -- The key lives until the bucket is empty and a grace more; its
    -- expiry E moves, to a grace beyond that, only when it comes too
    -- soon: a key hit often is not given a new TTL at every hit.
    -- (floor and ceil written out: a builtin call costs more.)
    local t = r + wns
    local ms = (t - t % 1000000) / 1000000
    local x = wns / 1000000 + 1
    local need = x - x % 1
    if need < x then need = need + 1 end
    need = M + need + grace
    local keep = E and E >= need
    if not keep then E = need + grace end
    local s = pack('ddddd', M + ms, t - ms * 1000000, wq, l, E)
    local w
    if keep then
      w = redis.pcall('SET', key, s, 'KEEPTTL')
    else
      w = redis.pcall('SET', key, s, 'PX', E - M)
    end
    if w.err then err = w.err elseif seen then seen[key] = s end
  end
end
`

var (
	fixedLua = redis.NewScript(fixedScript)
	// fixedSHA is fixedLua's hash boxed once, not at every call.
	fixedSHA any = fixedLua.Hash()
	countLua     = redis.NewScript(countScript)
	drainLua     = redis.NewScript(drainScript)
)

// drainSHA is drainLua's SHA1 as an argument, boxed once.
var drainSHA any = drainLua.Hash()
