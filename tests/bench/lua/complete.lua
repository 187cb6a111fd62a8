-- COMPLETE, scripted: KEYS job active completed events; ARGV token result [KEEP n] [AGE ms].
-- Loaded after common.lua. Moves a held job (in active, its row carrying the token) to
-- completed (row: result, finish time, am+1, the token kept), writes a `completed` event and
-- applies retention: the oldest beyond KEEP (default KEEP_COMPLETED, a soft cap) and with AGE those
-- finished before now-AGE, at most RETENTION_BATCH, are removed with their rows; KEEP 0
-- deletes the job itself. The same COMPLETE repeated by the finishing token answers 0.
if #KEYS ~= 4 then
  return refuse('EMQSHAPE numkeys must be 4')
end
if #ARGV < 2 then
  return refuse('EMQSHAPE EMQ.COMPLETE takes token result [KEEP n] [AGE ms]')
end
local token, result = ARGV[1], ARGV[2]
local o, bad = options(3, { KEEP = true, AGE = true })
if not o then
  return bad
end
local q, id = layout({ 'job', 'active', 'completed', 'events' })
if not q then
  return id
end
local f = fence()
if f then
  return f
end
if not job_id_ok(id) then
  return refuse('EMQID malformed job id ' .. id)
end
if #token < 1 or #token > 128 then
  return refuse('EMQARG token must be 1..128 bytes')
end
if #result > MAX_PAYLOAD then
  return refuse('EMQARG result is larger than trafikey.max-payload')
end
local keep = o.KEEP
-- Without KEEP the config is a soft cap, as the module's: trimmed back to it once over by
-- keep/16 (at most 64).
local slack = 0
if keep == nil then
  keep = KEEP_COMPLETED
  slack = math.min(math.floor(keep / 16), 64)
elseif keep < -1 then
  return refuse('EMQARG KEEP must be -1, 0 or a count')
end
if o.AGE then
  local e = in_range(o.AGE, 0, TIME_MAX, 'AGE')
  if e then
    return e
  end
end
local job, active, completed, events = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local r = redis.call('HMGET', job, 'st', 'tk', 'am')
if r[1] == false and redis.call('EXISTS', job) == 0 then
  return refuse('EMQNOJOB no job ' .. id)
end
local held = r[1] == 'active' and r[2] == token and redis.call('ZSCORE', active, id)
if not held then
  if r[1] == 'completed' and r[2] == token then
    return 0
  end
  return refuse('EMQLEASE job ' .. id .. ' is not held with this token')
end
local now = now_ms()
local made = tonumber(r[3] or '0') + 1

-- Retention: the oldest entries already there beyond KEEP (and, with AGE, those finished
-- before now-AGE), at most RETENTION_BATCH; never the job being finished.
local by_count = 0
if keep > 0 then
  local len = redis.call('ZCARD', completed) + 1
  if len > keep + slack then
    by_count = math.min(len - keep, RETENTION_BATCH)
  end
end
local retire = {}
if o.AGE then
  local cutoff = now - o.AGE
  local seen = redis.call('ZRANGE', completed, 0, int(RETENTION_BATCH - 1), 'WITHSCORES')
  for i = 1, #seen, 2 do
    if not (#retire < by_count or tonumber(seen[i + 1]) < cutoff) then
      break
    end
    retire[#retire + 1] = seen[i]
  end
  if #retire > 0 then
    redis.call('ZREM', completed, unpack(retire))
  end
elseif by_count > 0 then
  local z = redis.call('ZPOPMIN', completed, int(by_count))
  for i = 1, #z, 2 do
    retire[#retire + 1] = z[i]
  end
end

redis.call('ZREM', active, id)
if keep == 0 then
  redis.call('DEL', job)
else
  redis.call('ZADD', completed, int(now), id)
  redis.call('HSET', job, 'st', 'completed', 'r', result, 'f', int(now), 'am', int(made))
end
emit(events, 'completed', id, 'attempt', int(made))
if #retire > 0 then
  local rows = {}
  for i, m in ipairs(retire) do
    rows[i] = row_key(q, m)
  end
  redis.call('DEL', unpack(rows))
end
return 1
