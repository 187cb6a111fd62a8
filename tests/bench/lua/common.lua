-- The scripted twin of trafikey's ENQUEUE, CLAIM and COMPLETE (benchmark use only).
--
-- The benchmark loads each verb as this prelude followed by the verb's file, with EVALSHA,
-- so the twin takes exactly the module's keys and arguments (`EVALSHA sha <numkeys> keys...
-- args...` = `EMQ.<VERB> <numkeys> keys... args...`) and makes the same checks and the same
-- writes (src/verbs/*.rs, src/queue.rs): layout, the fence (one GET of {emq}:version),
-- the id gate and value ranges, the row's fields, the state sets, the capped events stream
-- and finished-job retention. The clock is the server's, from redis.call('TIME').
--
-- What it leaves out, because a script cannot do it or cannot do it cheaply: type checks
-- before writes (a wrong-typed key errors at the write instead), the caller's ACL checks on
-- undeclared keys, and the INFO counters. All of these make the twin cheaper, not dearer.
--
-- The module's configs it mirrors. The benchmark rewrites these lines to the server's values
-- before loading, so the twin always runs with the same settings as the module beside it.
local EVENTS_MAXLEN = 10000 -- trafikey.events-maxlen (0: no events)
local KEEP_COMPLETED = 1000 -- trafikey.keep-completed
local RETENTION_BATCH = 1000 -- trafikey.retention-batch
local PROMOTE_BATCH = 1000 -- trafikey.promote-batch
local MAX_PAYLOAD = 1048576 -- trafikey.max-payload

local EPOCH = 'echomq:6.0.0'
local TIME_MAX = 9007199254740991

-- Integers as the module writes them (redis.call would format a Lua number as a double).
local function int(n)
  return string.format('%d', n)
end

local function refuse(text)
  return redis.error_reply(text)
end

-- The server clock in ms.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Layout: each key is emq:{Q}:<role> of its position, all of one Q. Returns Q and the
-- suffix of the job key (if any), or nil and the refusal.
local function layout(roles)
  local q, id
  for i, role in ipairs(roles) do
    local kq, rest = string.match(KEYS[i] or '', '^emq:{([^{}%c ]+)}:(.+)$')
    local ok = kq ~= nil and #kq <= 128
    if ok then
      if role == 'job' then
        local suffix = string.match(rest, '^job:(.+)$')
        ok = suffix ~= nil
        id = suffix
      else
        ok = rest == role
      end
    end
    if not ok then
      return nil, refuse('EMQLAYOUT key ' .. i .. ' must be emq:{Q}:' .. role .. (role == 'job' and ':<ID>' or ''))
    end
    if q ~= nil and kq ~= q then
      return nil, refuse('EMQLAYOUT all keys must name one queue')
    end
    q = kq
  end
  return q, id
end

-- The fence: one read of {emq}:version; only this wire passes.
local function fence()
  local v = redis.call('GET', '{emq}:version')
  if v == EPOCH then
    return nil
  end
  if not v then
    return refuse('EMQWIRE expected echomq:6.0.0 but {emq}:version is absent')
  end
  return refuse('EMQWIRE expected echomq:6.0.0 found ' .. string.gsub(string.sub(v, 1, 64), '[^\33-\126]', function(c)
    return string.format('\\x%02X', string.byte(c))
  end))
end

-- The id gate: JOB + 11 Base62 digits, no greater than u64::MAX (the server runs with
-- locale-collate C, so string comparison is byte order).
local function job_id_ok(id)
  if #id ~= 14 or string.sub(id, 1, 3) ~= 'JOB' then
    return false
  end
  local p = string.sub(id, 4)
  return string.match(p, '^[0-9A-Za-z]+$') ~= nil and p <= 'LygHa16AHYF'
end

local function int_of(s)
  if type(s) ~= 'string' or not string.match(s, '^%-?%d+$') or #s > 19 then
    return nil
  end
  return tonumber(s)
end

local function in_range(v, lo, hi, what)
  if v < lo or v > hi then
    return refuse('EMQARG ' .. what .. ' must be ' .. lo .. '..=' .. hi)
  end
  return nil
end

-- Options after the fixed arguments, from index `from` of ARGV, among `allowed`
-- (a set of upper-case words). Returns a table or nil and the refusal.
local function options(from, allowed)
  local o = {}
  local i = from
  while ARGV[i] do
    local word = string.upper(ARGV[i])
    if not allowed[word] then
      return nil, refuse('EMQSHAPE unknown option ' .. ARGV[i])
    end
    if o[word] ~= nil then
      return nil, refuse('EMQSHAPE option ' .. word .. ' given twice')
    end
    if word == 'LIFO' then
      o[word] = true
      i = i + 1
    elseif word == 'OPTS' then
      if ARGV[i + 1] == nil then
        return nil, refuse('EMQSHAPE option OPTS needs a value')
      end
      o[word] = ARGV[i + 1]
      i = i + 2
    elseif word == 'BACKOFF' then
      local kind, ms = ARGV[i + 1], int_of(ARGV[i + 2])
      if kind == nil or ARGV[i + 2] == nil then
        return nil, refuse('EMQSHAPE option BACKOFF needs a value')
      end
      if ms == nil then
        return nil, refuse('EMQSHAPE BACKOFF must be a number')
      end
      kind = string.upper(kind)
      if kind ~= 'FIXED' and kind ~= 'EXP' then
        return nil, refuse('EMQSHAPE BACKOFF takes FIXED or EXP')
      end
      o[word] = { kind, ms }
      i = i + 3
    else
      if ARGV[i + 1] == nil then
        return nil, refuse('EMQSHAPE option ' .. word .. ' needs a value')
      end
      local v = int_of(ARGV[i + 1])
      if v == nil then
        return nil, refuse('EMQSHAPE ' .. word .. ' must be a number')
      end
      o[word] = v
      i = i + 2
    end
  end
  return o
end

-- One event: XADD events MAXLEN ~ cap * event <name> id <ID> facts...
local function emit(events, name, id, ...)
  if EVENTS_MAXLEN > 0 then
    redis.call('XADD', events, 'MAXLEN', '~', int(EVENTS_MAXLEN), '*', 'event', name, 'id', id, ...)
  end
end

local function row_key(q, id)
  return 'emq:{' .. q .. '}:job:' .. id
end
