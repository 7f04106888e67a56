-- The wrk script of `seckill-dev bench reserve` (wrk.go runs it).
--
-- Arguments after "--": TOKENS THREADS SALT RATE
--   TOKENS   a file of bearer tokens, one per line: one per request, never
--            reused. Thread k (0-based) of THREADS sends lines k+1, k+1+THREADS,
--            k+1+2*THREADS, ... and stops itself once each has been answered.
--   SALT     8 hex digits: the first group of every Idempotency-Key
--            (SALT-0000-4TTT-8000-NNNNNNNNNNNN, T the thread, N its counter:
--            a fresh UUID-shaped key per request).
--   RATE     requests per second over all threads, paced per thread with
--            delay() on a schedule of its own (open loop as long as a
--            connection is free); 0: closed loop, each connection sends as
--            soon as its answer is read.
--   WANT     the status and the body's code an answer must have to count as
--            expected, e.g. 202:QUEUED.
--
-- done() prints one machine-readable line "seckill-wrk key=value ..." (and up
-- to 5 "seckill-wrk-sample <answer>" lines of unexpected answers) that
-- ParseWrkOutput reads.

local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } seckill_timespec;
int clock_gettime(int clk_id, seckill_timespec *tp);
]]
local ts = ffi.new("seckill_timespec")
local function now_ms()
  ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
end

-- setup phase (the main Lua state): number the threads, keep them for done().
local threads = {}
function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end

-- running phase (one Lua state per thread).
local tokens, quota, claimed, sent = {}, 0, 0, 0
local salt, interval, next_slot = "00000000", 0, nil
local want_status, want_code = 0, ""
local path, host
answered, expected, unexpected, statuses, samples = 0, 0, 0, {}, {}

function init(args)
  local file, nthreads = args[1], tonumber(args[2])
  salt = args[3]
  local rate = tonumber(args[4])
  local ws, wc = string.match(args[5], "^(%d+):(.*)$")
  want_status, want_code = tonumber(ws), wc
  if rate > 0 then
    interval = 1000 * nthreads / rate
  end
  local i = 0
  for line in io.lines(file) do
    if i % nthreads == id then
      tokens[#tokens + 1] = "Bearer " .. line
    end
    i = i + 1
  end
  quota = #tokens
  path = wrk.path
end

-- delay claims the next request of this thread (and, paced, its slot): a
-- connection that finds the thread's tokens used up never sends again.
function delay()
  if claimed >= quota then
    return 3600000
  end
  claimed = claimed + 1
  if interval == 0 then
    return 0
  end
  local t = now_ms()
  if next_slot == nil then
    next_slot = t
  end
  local slot = next_slot
  next_slot = next_slot + interval
  if slot <= t then
    return 0
  end
  return math.floor(slot - t + 0.5)
end

function request()
  if sent >= claimed then
    -- Not claimed by delay(): wrk's own check of the script (it calls
    -- request() once on thread 1 after init, to parse it); nothing is sent.
    return wrk.format("POST", path, {["Authorization"] = tokens[1], ["Idempotency-Key"] = "verify"}, "")
  end
  sent = sent + 1
  local key = string.format("%s-0000-4%03x-8000-%012x", salt, id, sent)
  return wrk.format("POST", path, {
    ["Authorization"] = tokens[sent],
    ["Idempotency-Key"] = key,
  }, "")
end

function response(status, headers, body)
  answered = answered + 1
  local k = tostring(status)
  statuses[k] = (statuses[k] or 0) + 1
  if status == want_status and string.find(body, want_code, 1, true) then
    expected = expected + 1
  else
    unexpected = unexpected + 1
    if #samples < 5 then
      samples[#samples + 1] = k .. " " .. string.sub(string.gsub(body, "[\r\n]", " "), 1, 200)
    end
  end
  if answered == quota then
    -- wrk itself runs until -d or SIGINT: tell the bench this thread is done.
    io.write("seckill-wrk-thread-done " .. id .. "\n")
    io.flush()
    wrk.thread:stop()
  end
end

-- done phase (the main Lua state again).
function done(summary, latency, requests)
  local n, exp, unexp, st, smp = 0, 0, 0, {}, {}
  for _, t in ipairs(threads) do
    n = n + t:get("answered")
    exp = exp + t:get("expected")
    unexp = unexp + t:get("unexpected")
    for k, v in pairs(t:get("statuses")) do
      st[k] = (st[k] or 0) + v
    end
    for _, s in ipairs(t:get("samples")) do
      if #smp < 5 then
        smp[#smp + 1] = s
      end
    end
  end
  local e = summary.errors
  local parts = {
    string.format("requests=%d answered=%d expected=%d unexpected=%d duration_us=%d",
      summary.requests, n, exp, unexp, summary.duration),
    string.format("p50_us=%d p90_us=%d p99_us=%d max_us=%d mean_us=%.1f",
      latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean),
    string.format("err_connect=%d err_read=%d err_write=%d err_timeout=%d err_status=%d",
      e.connect, e.read, e.write, e.timeout, e.status),
  }
  for k, v in pairs(st) do
    parts[#parts + 1] = string.format("status_%s=%d", k, v)
  end
  io.write("seckill-wrk " .. table.concat(parts, " ") .. "\n")
  for _, s in ipairs(smp) do
    io.write("seckill-wrk-sample " .. s .. "\n")
  end
end
