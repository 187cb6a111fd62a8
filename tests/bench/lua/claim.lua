-- CLAIM, scripted: KEYS wait prio active delayed meta events; ARGV token lease_ms [COUNT n].
-- Loaded after common.lua. Promotes due delayed jobs (at most PROMOTE_BATCH), then, unless
-- meta says paused, takes up to COUNT ready jobs, wait's front (right end) first, then prio
-- by (priority, id); each becomes active with deadline now+lease_ms, its row records the
-- token, as+1 and the claim time, and an `active` event is written.
-- Replies [[id name data attempt] ...]. (PAUSE/RESUME are not part of the twin.)
if #KEYS ~= 6 then
  return refuse('EMQSHAPE numkeys must be 6')
end
if #ARGV < 2 then
  return refuse('EMQSHAPE EMQ.CLAIM takes token lease_ms [COUNT n]')
end
local token = ARGV[1]
local lease = int_of(ARGV[2])
if lease == nil then
  return refuse('EMQSHAPE lease_ms must be a number')
end
local o, bad = options(3, { COUNT = true })
if not o then
  return bad
end
local q, err = layout({ 'wait', 'prio', 'active', 'delayed', 'meta', 'events' })
if not q then
  return err
end
local f = fence()
if f then
  return f
end
if #token < 1 or #token > 128 then
  return refuse('EMQARG token must be 1..128 bytes')
end
local count = o.COUNT or 1
local e = in_range(lease, 1, 2147483648, 'lease_ms') or in_range(count, 1, 1000, 'COUNT')
if e then
  return e
end
local wait, prio, active, delayed, meta, events = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local now = now_ms()

-- Promotion of due delayed jobs: back to ready by their priority.
local due = redis.call('ZRANGEBYSCORE', delayed, '-inf', int(now), 'LIMIT', 0, int(PROMOTE_BATCH))
for _, id in ipairs(due) do
  redis.call('ZREM', delayed, id)
  local row = row_key(q, id)
  if redis.call('EXISTS', row) == 1 then
    local p = tonumber(redis.call('HGET', row, 'p') or '0')
    if p == 0 then
      redis.call('LPUSH', wait, id)
      redis.call('HSET', row, 'st', 'wait')
    else
      redis.call('ZADD', prio, int(p), id)
      redis.call('HSET', row, 'st', 'prio')
    end
    emit(events, 'waiting', id, 'prev', 'delayed')
  end
end

local out = {}
if redis.call('HEXISTS', meta, 'paused') == 1 then
  return out
end
local deadline = int(math.min(now + lease, TIME_MAX))
-- The front of wait (its right end), then prio in (priority, id) order.
local ids = redis.call('RPOP', wait, count) or {}
if #ids < count then
  local z = redis.call('ZPOPMIN', prio, count - #ids)
  for i = 1, #z, 2 do
    ids[#ids + 1] = z[i]
  end
end
if #ids == 0 then
  return out
end
local taken, zargs = {}, {}
for _, id in ipairs(ids) do
  local row = row_key(q, id)
  local r = redis.call('HMGET', row, 'st', 'n', 'd', 'as', 'am')
  if r[1] then -- an id without its row is dropped, never a refusal
    taken[#taken + 1] = { id, row, r }
    zargs[#zargs + 1] = deadline
    zargs[#zargs + 1] = id
  end
end
if #zargs > 0 then
  redis.call('ZADD', active, unpack(zargs))
end
local at = int(now)
for _, t in ipairs(taken) do
  local id, row, r = t[1], t[2], t[3]
  local attempt = tonumber(r[5] or '0') + 1
  redis.call('HSET', row, 'st', 'active', 'tk', token, 'as', int(tonumber(r[4] or '0') + 1), 'ca', at)
  emit(events, 'active', id, 'attempt', int(attempt))
  out[#out + 1] = { id, r[2], r[3], attempt }
end
return out
