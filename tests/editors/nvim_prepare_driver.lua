-- Drives where the cursor rests (the plugin's cursor_rest.lua) headless, Neovim 0.7 to 0.11, and
-- writes what it saw as JSON for test_nvim_prepare.py: every `dllm/prepareCompletion` the client
-- sent (a spy on its notify) with the step it came in, and the server's cursorPrepare stats.
-- The keys go through Neovim's own loop (nvim_feedkeys without "x"), so CursorMoved,
-- CursorMovedI and TextChangedI fire as they do for a person; a timer resumes the steps.
-- Environment: as nvim_harness.lua reads it; the file is tests/editors' REAL_SOURCE + "\n".
local H = dofile(debug.getinfo(1, "S").source:sub(2):match("(.*/)") .. "nvim_harness.lua")
local result, timeout, log = H.result, H.timeout, H.log

local function keys(k)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(k, true, false, true), "n", false)
end

H.run(function()
  H.start({ ghost_text = { debounce_ms = 30 } })
  local status = require("dllm.status")
  local commands = require("dllm.commands")
  H.wait_attached()
  vim.wait(timeout, function() return status.current ~= nil and status.current.state ~= "loading" end, 50)
  result.status = status.current
  result.rest_ms = require("dllm.config").options.prepare_at_cursor.rest_ms

  local client = require("dllm.lsp").client(0)
  local step = "start"
  result.prepares = {}
  local notify = client.notify
  client.notify = function(...)
    local args = { ... }
    if type(args[1]) == "table" then
      table.remove(args, 1) -- client:notify(...) on 0.11
    end
    if args[1] == "dllm/prepareCompletion" then
      result.prepares[#result.prepares + 1] = { step = step, mode = vim.api.nvim_get_mode().mode, params = args[2] }
    end
    return notify(...)
  end

  H.steps(function()
    local wait_for, sleep = H.wait_for, H.sleep
    local settle = result.rest_ms + 450
    local function at(name, k)
      step = name
      keys(k)
      sleep(settle)
      log(name)
    end
    local function stats()
      local got
      commands.execute("dllm.serverStats", {}, function(r) got = r end)
      wait_for(function() return got ~= nil end, timeout)
      return type(got) == "table" and got.cursorPrepare or got
    end

    -- Normal mode: a jump, then a move along the same line (its end is the place already sent).
    at("jump", "9G")
    at("along the line", "w")
    -- Arrow keys held down: only the line the cursor stops on.
    step = "burst"
    for _ = 1, 3 do
      keys("j")
      sleep(50)
    end
    sleep(settle)
    log("burst")
    local prepared = stats()
    wait_for(function()
      prepared = stats()
      return type(prepared) ~= "table" or prepared.complete + prepared.stopped >= prepared.started
    end, timeout)
    result.stats_after_normal = prepared

    -- Insert mode: typing a line with a person's pauses sends nothing; a cursor key then does.
    at("to the blank line", "j")
    step = "typing"
    keys("A")
    for ch in ("    return width * height"):gmatch(".") do
      keys(ch)
      sleep(60)
    end
    sleep(settle)
    log("typed")
    result.typed_line = vim.api.nvim_get_current_line()
    at("insert-mode cursor key", "<Left>")
    at("back to Normal mode", "<Esc>")
    result.stats = stats()
  end)
  -- Returns: Neovim's main loop runs Normal mode from here, as for a person.
end)
