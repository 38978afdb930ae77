-- Drives the dllm Neovim plugin headless, like a person would, and writes what
-- it saw to a JSON file that test_nvim.py checks. Runs on Neovim 0.7 to 0.11:
--   nvim --headless -u NONE -i NONE -n -c 'luafile tests/editors/nvim_driver.lua'
-- Environment: what nvim_harness.lua reads (the plugin, the server, the file, the
-- result's path), DLLM_LINE (a blank line of the file, which gets the ghost) and
-- DLLM_GHOST_TIMEOUT_MS.
local env = vim.env
local H = dofile(debug.getinfo(1, "S").source:sub(2):match("(.*/)") .. "nvim_harness.lua")
local result, timeout, log, finish, lines = H.result, H.timeout, H.log, H.finish, H.lines
local uv = vim.uv or vim.loop

local function main()
  H.start({ ghost_text = { debounce_ms = 30 } })

local ghost = require("dllm.ghost")
local status = require("dllm.status")
result.native_inline = ghost.native
H.wait_attached()
-- The engine loads in the background; ghost text needs it ready.
vim.wait(timeout, function() return status.current ~= nil and status.current.state ~= "loading" end, 50)
result.status = status.current
local ghost_timeout = tonumber(env.DLLM_GHOST_TIMEOUT_MS or "10000")

-- Insert mode is held by feedkeys("...", "x!") until a key exits it, so the
-- rest runs in a coroutine resumed by a timer (Neovim's loop keeps running).
local row = tonumber(env.DLLM_LINE or "2")
vim.api.nvim_win_set_cursor(0, { row, 0 })
local step_error
local co = coroutine.create(function()
  local wait_for = H.wait_for -- resumed by the timer below
  -- No ghost text is recorded (ghost = nil), not an error: test_nvim.py decides.
  if wait_for(function() return ghost.shown() ~= nil end, ghost_timeout) then
    log("ghost")
    result.ghost = ghost.shown()
    local marks = vim.api.nvim_buf_get_extmarks(0, ghost.namespace, 0, -1, { details = true })
    result.extmarks = #marks
    result.virt_lines = {}
    for _, chunks in ipairs((marks[1] and marks[1][4].virt_lines) or {}) do
      result.virt_lines[#result.virt_lines + 1] = chunks[1][1]
    end
    result.line_before_accept = vim.api.nvim_get_current_line()
    vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("<Tab>", true, false, true), "m", false)
    if wait_for(function() return ghost.shown() == nil end, 2000) then
      log("accepted")
      result.line_after_accept = vim.api.nvim_get_current_line()
      result.cursor_after_accept = vim.api.nvim_win_get_cursor(0)
      result.buffer_after_accept = lines()
      -- DLLM_ENTER_PAUSE_MS: a person's pause between <Tab> and <CR>, longer than the plugin's
      -- debounce, so the plugin asks at the end of the accepted line before Enter.
      local pause_ms = tonumber(env.DLLM_ENTER_PAUSE_MS or "0")
      if pause_ms > 0 then
        local resume_at = uv.now() + pause_ms
        wait_for(function() return uv.now() >= resume_at end, pause_ms + 1000)
      end
      -- A new line, its automatic ghost dismissed, then the suggest key: an explicit request.
      -- DLLM_OPEN_BELOW: a Vim user's way, Esc, a rest in Normal mode (the cursor-rest prepare
      -- at the accepted line's end), then `o`.
      -- Esc ends the Insert mode this driver runs in (the `feedkeys("A", "x!")` below returns);
      -- the main chunk then rests in Normal mode and types `o`, and this coroutine goes on.
      local open_below_ms = tonumber(env.DLLM_OPEN_BELOW or "0")
      local key = open_below_ms > 0 and "<Esc>" or "<CR>"
      vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(key, true, false, true), "n", false)
      -- The line Enter made (the editor's own indentation), and with DLLM_AFTER_ENTER_MS the
      -- ghost text there, which the server's prefetch of that place may have answered.
      local accepted_row = result.cursor_after_accept[1]
      local function on_new_line()
        return vim.api.nvim_win_get_cursor(0)[1] > accepted_row and vim.api.nvim_get_mode().mode == "i"
      end
      if wait_for(on_new_line, 2000 + open_below_ms) then
        result.buffer_after_enter = lines()
        result.cursor_after_enter = vim.api.nvim_win_get_cursor(0)
      end
      local after_enter_ms = tonumber(env.DLLM_AFTER_ENTER_MS or "0")
      if after_enter_ms > 0 and not env.DLLM_SUGGEST_KEY then
        local t0 = uv.now()
        if wait_for(function() return ghost.shown() ~= nil end, after_enter_ms) then
          result.ghost_after_enter = ghost.shown()
          result.ghost_after_enter_ms = uv.now() - t0
        end
      end
      if env.DLLM_SUGGEST_KEY and wait_for(function() return ghost.shown() ~= nil end, ghost_timeout) then
        result.automatic_ghost = ghost.shown()
        vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("<C-]>", true, false, true), "m", false)
        wait_for(function() return ghost.shown() == nil end, 2000)
        vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(env.DLLM_SUGGEST_KEY, true, false, true), "m", false)
        if wait_for(function() return ghost.shown() ~= nil end, ghost_timeout) then
          result.invoked_ghost = ghost.shown()
        end
      end
    end
  end
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("<Esc>", true, false, true), "n", false)
end)
local timer = uv.new_timer()
timer:start(20, 20, vim.schedule_wrap(function()
  if coroutine.status(co) ~= "dead" then
    local resumed, e = coroutine.resume(co)
    if not resumed then
      step_error = "driver: " .. tostring(e)
      vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("<Esc>", true, false, true), "n", false)
    end
  end
end))
vim.fn.feedkeys("A", "x!")
if tonumber(env.DLLM_OPEN_BELOW or "0") > 0 and coroutine.status(co) ~= "dead" then
  vim.wait(tonumber(env.DLLM_OPEN_BELOW)) -- a rest in Normal mode; the timers run meanwhile
  vim.fn.feedkeys("o", "x!")
end
timer:stop()
if step_error then
  result.buffer = lines()
  return finish(false, step_error)
end
result.buffer_after_accept = result.buffer_after_accept or lines()
vim.api.nvim_buf_set_lines(0, #result.buffer_after_accept, -1, true, {}) -- the suggest step's new line

-- Commands: regenerate line 1 (the server answers with workspace/applyEdit).
local commands = require("dllm.commands")
vim.cmd("1DllmRegenerate")
-- The server answers after the client applied its workspace/applyEdit.
vim.wait(timeout, function() return commands.last ~= nil end, 50)
result.regenerate_response = commands.last and (commands.last.result or { error = commands.last.err })
result.buffer_after_regenerate = lines()
log("regenerate")

-- :DllmFillHoles on a function whose body is a hole marker.
vim.api.nvim_buf_set_lines(0, -1, -1, true, { "def sub(a, b):", "    {{fill}}" })
commands.last = nil
vim.cmd("DllmFillHoles")
vim.wait(timeout, function() return commands.last ~= nil end, 50)
result.fill_response = commands.last and (commands.last.result or { error = commands.last.err })
result.buffer_after_fill = lines()
log("fill")

local toggled
commands.execute("dllm.toggleCompletions", { false }, function(r) toggled = r end)
vim.wait(timeout, function() return toggled ~= nil end, 50)
result.toggle = toggled
commands.execute("dllm.toggleCompletions", { true }, function() end)

local engine_status
commands.execute("dllm.engineStatus", {}, function(r) engine_status = r end)
vim.wait(timeout, function() return engine_status ~= nil end, 50)
result.engine_status = engine_status

local server_stats
commands.execute("dllm.serverStats", {}, function(r) server_stats = r end)
vim.wait(timeout, function() return server_stats ~= nil end, 50)
result.prefetch = type(server_stats) == "table" and server_stats.prefetch or server_stats
result.cursor_prepare = type(server_stats) == "table" and server_stats.cursorPrepare or nil

-- :checkhealth dllm renders into a new buffer; keep its text.
vim.cmd("checkhealth dllm")
result.health = vim.api.nvim_buf_get_lines(0, 0, -1, false)
finish(true)
end

H.run(main)
