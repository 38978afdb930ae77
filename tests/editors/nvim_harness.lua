-- What every headless Neovim driver of these tests does (Neovim 0.7 to 0.11), loaded with
-- dofile() from a driver run as `nvim --headless -u NONE -i NONE -n -c 'luafile DRIVER'`:
-- the result table written as JSON to DLLM_RESULT at the end (then quit, `cquit 1` on a
-- failure), the plugin from DLLM_PLUGIN set up with DLLM_CMD (or DLLM_PYTHON) and
-- DLLM_SETTINGS, DLLM_FILE opened, and waits for the dllm client to attach.
local env = vim.env
local H = { result = { steps = {} }, timeout = tonumber(env.DLLM_TIMEOUT_MS or "20000") }

function H.log(step)
  H.result.steps[#H.result.steps + 1] = step
end

function H.finish(ok, message)
  H.result.ok = ok
  H.result.error = message
  local f = assert(io.open(env.DLLM_RESULT, "w"))
  f:write(vim.fn.json_encode(H.result))
  f:close()
  vim.cmd(ok and "qall!" or "cquit 1")
end

function H.lines()
  return vim.api.nvim_buf_get_lines(0, 0, -1, true)
end

-- setup{} with the environment's server and settings plus `opts`, then DLLM_FILE opened.
function H.start(opts)
  vim.opt.runtimepath:prepend(env.DLLM_PLUGIN)
  -- DLLM_FILETYPE_INDENT: the filetype's indent script, as a user's config has it (`-u NONE`
  -- leaves only 'autoindent': the new line copies the last one's indentation).
  vim.cmd(env.DLLM_FILETYPE_INDENT and "filetype plugin indent on" or "filetype on")
  vim.o.swapfile = false
  vim.o.expandtab = true
  -- DLLM_PYTHON: the plugin builds `python -m dllm_lsp serve` itself.
  local server = env.DLLM_PYTHON and { python = env.DLLM_PYTHON } or { cmd = vim.fn.json_decode(env.DLLM_CMD) }
  require("dllm").setup(vim.tbl_extend("force", {
    cmd = server.cmd,
    python = server.python,
    settings = vim.fn.json_decode(env.DLLM_SETTINGS or "{}"),
  }, opts or {}))
  vim.cmd("edit " .. vim.fn.fnameescape(env.DLLM_FILE))
  H.result.version = tostring(vim.version().major) .. "." .. tostring(vim.version().minor)
end

-- The dllm client attached to the current buffer, or an error.
function H.wait_attached()
  local lsp = require("dllm.lsp")
  if not vim.wait(H.timeout, function() return lsp.client(0) ~= nil end, 50) then
    error("no dllm client attached to " .. env.DLLM_FILE)
  end
  H.log("attached")
end

local uv = vim.uv or vim.loop

-- Inside H.steps: wait until `cond()` holds (true) or `ms` pass (false), the loop running.
function H.wait_for(cond, ms)
  local deadline = uv.now() + ms
  while not cond() do
    if uv.now() > deadline then
      return false
    end
    coroutine.yield()
  end
  return true
end

function H.sleep(ms)
  H.wait_for(function() return false end, ms)
end

-- Runs `body` as steps a 20 ms timer resumes (the keys it feeds go through Neovim's own loop,
-- as a person's), then finishes: a Lua error is the failure's message. Returns at once: Neovim's
-- main loop runs from there.
function H.steps(body)
  local co = coroutine.create(body)
  local timer = uv.new_timer()
  timer:start(20, 20, vim.schedule_wrap(function()
    local ok, err = coroutine.resume(co)
    if not ok or coroutine.status(co) == "dead" then
      -- Stopped first: quitting runs the loop, and this timer must not resume the steps then.
      timer:stop()
      H.finish(ok, (not ok) and ("driver: " .. tostring(err)) or nil)
    end
  end))
end

-- Runs `main` and finishes: a Lua error is the failure's message, with its traceback.
function H.run(main)
  local ok, err = xpcall(main, debug.traceback)
  if not ok then
    H.finish(false, "driver: " .. tostring(err))
  end
end

return H
