//! The server-side scripts: every state change of a record is one Lua script, which Redis
//! runs atomically (no other command runs between its reads and its writes), so two
//! instances racing on one key get exactly one owner without a lock held across a round
//! trip. Each script is sent once and then called by its SHA-1 (`EVALSHA`; the client
//! loads it again if the server lost its script cache, after a restart).
//!
//! Time: every script reads the server's clock (`TIME`) unless the caller passes a time
//! (a store on an injected clock, for tests). Deadlines are milliseconds since the epoch.
//!
//! The keys of a namespace `P`, all under the hash tag `{P}` (one Cluster slot):
//!
//! ```text
//! {P}:r:<member>   a hash per record: fp, token, fin (0/1), lease, exp, res
//! {P}:leases       sorted set: records in flight (finished = no), by lease deadline
//! {P}:results      sorted set: finished records, by result deadline
//! {P}:tokens       the last fencing token handed out (tokens only grow; a counter
//!                  created afresh starts at the server's time in microseconds)
//! {P}:q:<scope>    per scope, how many records are in flight (the scope quota); removed
//!                  when it reaches 0, so a scope with nothing in flight leaves no key
//! ```
//!
//! A record is counted against the capacity while it is in one of the two sorted sets:
//! from its claim until it is released, forgotten, or swept after its result expired.

use redis::Script;

/// Reads the clock: the caller's time if it passed one, else the server's.
const PRELUDE: &str = r"
local function clock(given)
  if given ~= 'server' then return tonumber(given) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function int(n) return string.format('%d', n) end
";

/// KEYS: record, leases, results, tokens, quota. ARGV: fingerprint, lease ms, capacity,
/// scope quota (0: none), time ('server': the server's), member.
const CLAIM: &str = r"
local now = clock(ARGV[5])
local f = redis.call('HMGET', KEYS[1], 'fp', 'fin', 'lease', 'exp')
local recovered = false
if f[1] then
  if f[2] == '1' then
    if tonumber(f[4]) > now then
      if f[1] ~= ARGV[1] then return {'reused'} end
      return {'replay', redis.call('HGET', KEYS[1], 'res')}
    end
  elseif tonumber(f[3]) > now then
    if f[1] ~= ARGV[1] then return {'reused'} end
    return {'inflight', f[3], int(now)}
  elseif f[1] ~= ARGV[1] then
    return {'reused'}
  else
    recovered = true
  end
end
local member = ARGV[6]
-- A record Redis expired at its TTL is gone, but its entry in the results set still
-- counts until a sweep: a claim of it takes that place instead of a new one.
local replaced = f[1] or redis.call('ZSCORE', KEYS[3], member)
if not recovered then
  -- The scope's quota first, as the memory store: a key refused by both is refused by its
  -- scope (a sweep of the store would not admit it).
  local quota = tonumber(ARGV[4])
  if quota > 0 and tonumber(redis.call('GET', KEYS[5]) or '0') >= quota then
    return {'quota'}
  end
  local records = redis.call('ZCARD', KEYS[2]) + redis.call('ZCARD', KEYS[3])
  if not replaced and records >= tonumber(ARGV[3]) then return {'full'} end
end
-- Tokens grow across the namespace's whole life: one past the last handed out, or, when
-- the counter is gone (the namespace dropped, a restart that forgot it), the server's
-- time in microseconds, above every token handed out before (fewer than 1,000 claims a
-- millisecond since the counter began). Always the server's: an injected clock (a test's)
-- need not move, and a counter begun again at its time would repeat a token.
local last = redis.call('GET', KEYS[4])
local token = last and tonumber(last) + 1 or clock('server') * 1000
redis.call('SET', KEYS[4], int(token))
local until_ms = now + tonumber(ARGV[2])
if replaced then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[3], member)
end
redis.call('HSET', KEYS[1], 'fp', ARGV[1], 'token', int(token), 'fin', '0',
  'lease', int(until_ms), 'exp', '0')
redis.call('ZADD', KEYS[2], int(until_ms), member)
if not recovered then redis.call('INCR', KEYS[5]) end
if recovered then return {'recover', int(token), int(until_ms)} end
return {'acquired', int(token), int(until_ms)}
";

/// KEYS: record, leases, results, quota. ARGV: token, result TTL ms, result, time,
/// member, whether Redis expires the record itself ('1').
const COMPLETE: &str = r"
local f = redis.call('HMGET', KEYS[1], 'token', 'fin')
if f[1] ~= ARGV[1] or f[2] ~= '0' then return 0 end
local exp = clock(ARGV[4]) + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'fin', '1', 'exp', int(exp), 'res', ARGV[3])
redis.call('ZREM', KEYS[2], ARGV[5])
redis.call('ZADD', KEYS[3], int(exp), ARGV[5])
if redis.call('DECR', KEYS[4]) <= 0 then redis.call('DEL', KEYS[4]) end
if ARGV[6] == '1' then redis.call('PEXPIREAT', KEYS[1], int(exp)) end
return 1
";

/// KEYS: record, leases, quota. ARGV: token, member.
const RELEASE: &str = r"
local f = redis.call('HMGET', KEYS[1], 'token', 'fin')
if f[1] ~= ARGV[1] or f[2] ~= '0' then return 0 end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[2])
if redis.call('DECR', KEYS[3]) <= 0 then redis.call('DEL', KEYS[3]) end
return 1
";

/// KEYS: record, leases. ARGV: token, lease ms, time, member. The new deadline, or nil.
const RENEW: &str = r"
local f = redis.call('HMGET', KEYS[1], 'token', 'fin')
if f[1] ~= ARGV[1] or f[2] ~= '0' then return false end
local until_ms = clock(ARGV[3]) + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'lease', int(until_ms))
redis.call('ZADD', KEYS[2], int(until_ms), ARGV[4])
return int(until_ms)
";

/// KEYS: results. ARGV: time, most to remove, record key prefix. How many it removed.
const SWEEP: &str = r"
local now = clock(ARGV[1])
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', int(now), 'LIMIT', 0,
  tonumber(ARGV[2]))
for _, member in ipairs(due) do
  local record = ARGV[3] .. member
  local f = redis.call('HMGET', record, 'fin', 'exp')
  if f[1] == '1' and tonumber(f[2]) <= now then redis.call('DEL', record) end
  redis.call('ZREM', KEYS[1], member)
end
return #due
";

/// KEYS: leases. ARGV: time, most to list, record key prefix. Member, fingerprint and
/// lease deadline of each claim whose lease ran out.
const PENDING: &str = r"
local now = clock(ARGV[1])
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', int(now), 'WITHSCORES', 'LIMIT', 0,
  tonumber(ARGV[2]))
local out = {}
for i = 1, #due, 2 do
  local fp = redis.call('HGET', ARGV[3] .. due[i], 'fp')
  if fp then
    table.insert(out, due[i])
    table.insert(out, fp)
    table.insert(out, due[i + 1])
  end
end
return out
";

/// KEYS: record. ARGV: time, whether to return a finished record's result ('1'). The
/// time, then (if there is a record) fp, fin, lease, exp, and the result if asked.
const READ: &str = r"
local now = clock(ARGV[1])
local f = redis.call('HMGET', KEYS[1], 'fp', 'fin', 'lease', 'exp')
if not f[1] then return {int(now)} end
local out = {int(now), f[1], f[2], f[3], f[4]}
if ARGV[2] == '1' and f[2] == '1' then table.insert(out, redis.call('HGET', KEYS[1], 'res')) end
return out
";

/// KEYS: record, leases, results, quota. ARGV: time, member. `absent`, `live` (with the
/// time and the lease deadline), or `removed` (with the time and the record's fields).
const FORGET: &str = r"
local now = clock(ARGV[1])
local f = redis.call('HMGET', KEYS[1], 'fp', 'fin', 'lease', 'exp')
if not f[1] then return {'absent', int(now)} end
if f[2] == '1' then
  if tonumber(f[4]) <= now then return {'absent', int(now)} end
elseif tonumber(f[3]) > now then
  return {'live', int(now), f[3]}
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[2])
redis.call('ZREM', KEYS[3], ARGV[2])
if f[2] ~= '1' and redis.call('DECR', KEYS[4]) <= 0 then redis.call('DEL', KEYS[4]) end
return {'removed', int(now), f[1], f[2], f[3], f[4]}
";

/// The scripts, each with its SHA-1 computed once.
#[derive(Debug)]
pub(crate) struct Scripts {
    pub(crate) claim: Script,
    pub(crate) complete: Script,
    pub(crate) release: Script,
    pub(crate) renew: Script,
    pub(crate) sweep: Script,
    pub(crate) pending: Script,
    pub(crate) read: Script,
    pub(crate) forget: Script,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        let with_clock = |body: &str| Script::new(&format!("{PRELUDE}{body}"));
        Self {
            claim: with_clock(CLAIM),
            complete: with_clock(COMPLETE),
            release: Script::new(RELEASE),
            renew: with_clock(RENEW),
            sweep: with_clock(SWEEP),
            pending: with_clock(PENDING),
            read: with_clock(READ),
            forget: with_clock(FORGET),
        }
    }

    /// Every script, to load at connect (a script error is then found at once).
    pub(crate) fn all(&self) -> [&Script; 8] {
        [
            &self.claim,
            &self.complete,
            &self.release,
            &self.renew,
            &self.sweep,
            &self.pending,
            &self.read,
            &self.forget,
        ]
    }
}
