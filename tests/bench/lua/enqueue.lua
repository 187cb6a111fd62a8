-- ENQUEUE, scripted: KEYS job wait prio events; ARGV name data [PRIORITY p] [ATTEMPTS n]
-- [BACKOFF FIXED|EXP ms] [OPTS blob] [LIFO]. Loaded after common.lua.
-- 1 created (row, ready set, `added` event), 0 when the row exists (nothing written).
if #KEYS ~= 4 then
  return refuse('EMQSHAPE numkeys must be 4')
end
if #ARGV < 2 then
  return refuse('EMQSHAPE EMQ.ENQUEUE needs name and data')
end
local o, bad = options(3, { PRIORITY = true, ATTEMPTS = true, BACKOFF = true, OPTS = true, LIFO = true })
if not o then
  return bad
end
local q, id = layout({ 'job', 'wait', 'prio', 'events' })
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
local name, data = ARGV[1], ARGV[2]
if #name < 1 or #name > 256 then
  return refuse('EMQARG name must be 1..256 bytes')
end
if #data > MAX_PAYLOAD or (o.OPTS and #o.OPTS > MAX_PAYLOAD) then
  return refuse('EMQARG data is larger than trafikey.max-payload')
end
local prio = o.PRIORITY or 0
local attempts = o.ATTEMPTS or 1
local e = in_range(prio, 0, 2097151, 'PRIORITY') or in_range(attempts, 1, 1000000, 'ATTEMPTS')
  or (o.BACKOFF and in_range(o.BACKOFF[2], 0, 2147483648, 'backoff'))
if e then
  return e
end

if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
local now = now_ms()
local row = { 'st', prio == 0 and 'wait' or 'prio', 'n', name, 'd', data, 'c', int(now) }
if prio ~= 0 then
  row[#row + 1] = 'p'
  row[#row + 1] = int(prio)
end
if attempts ~= 1 then
  row[#row + 1] = 'a'
  row[#row + 1] = int(attempts)
end
if o.BACKOFF then
  row[#row + 1] = 'b'
  row[#row + 1] = (o.BACKOFF[1] == 'FIXED' and 'f' or 'e') .. int(o.BACKOFF[2])
end
if o.OPTS then
  row[#row + 1] = 'o'
  row[#row + 1] = o.OPTS
end
redis.call('HSET', KEYS[1], unpack(row))
if prio ~= 0 then
  redis.call('ZADD', KEYS[3], int(prio), id)
elseif o.LIFO then
  redis.call('RPUSH', KEYS[2], id)
else
  redis.call('LPUSH', KEYS[2], id)
end
emit(KEYS[4], 'added', id, 'name', name, 'prio', int(prio))
return 1
