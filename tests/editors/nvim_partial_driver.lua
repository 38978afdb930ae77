-- Drives the plugin's partial accept and cycling headless (Neovim 0.7 to 0.11) and writes what
-- it saw as JSON for test_nvim_partial_accept.py: at an empty body, the ghost text; the
-- accept-word key, the accept-line key twice (the buffer, the cursor and the ghost after each);
-- then, with nothing shown, the accept-word key does what it did before; on a new line, the
-- next-suggestion key asks for more and it and the previous key step through them. The keys go through Neovim's own
-- loop (mapped, as a person's), a timer resumes the steps.
-- Environment: as nvim_harness.lua reads it.
local H = dofile(debug.getinfo(1, "S").source:sub(2):match("(.*/)") .. "nvim_harness.lua")
local result, timeout, log = H.result, H.timeout, H.log

local function keys(k)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(k, true, false, true), "m", false)
end

H.run(function()
  H.start({ ghost_text = { debounce_ms = 30 } })
  local ghost = require("dllm.ghost")
  local status = require("dllm.status")
  local options = require("dllm.config").options.keymaps
  H.wait_attached()
  vim.wait(timeout, function() return status.current ~= nil and status.current.state ~= "loading" end, 50)

  H.steps(function()
    local wait_for, sleep = H.wait_for, H.sleep
    local function snapshot(name)
      -- Past the plugin's debounce: a request the change caused would have been answered.
      sleep(300)
      result[name] = { buffer = H.lines(), cursor = vim.api.nvim_win_get_cursor(0), ghost = ghost.shown() }
      log(name)
    end
    keys("2GA")
    if not wait_for(function() return ghost.shown() ~= nil end, timeout) then
      error("no ghost text at the empty body")
    end
    snapshot("shown")
    keys(options.accept_word)
    snapshot("after_word")
    keys(options.accept_line)
    snapshot("after_line")
    keys(options.accept_line)
    snapshot("after_second_line")
    keys(options.accept_word) -- nothing shown: the key's own meaning (<M-Right>: nothing typed)
    snapshot("after_word_without_ghost")
    -- Cycling: a new line's typed suggestion is one; the next key asks for more (an explicit
    -- request, best of N with its other fills), then steps through them and wraps.
    keys("<Esc>o")
    if not wait_for(function() return ghost.shown() ~= nil end, timeout) then
      error("no ghost text on the new line")
    end
    snapshot("typed_one")
    keys(options.next)
    wait_for(function() return ghost.shown() ~= nil and ghost.shown() ~= result.typed_one.ghost end, timeout)
    snapshot("asked_more")
    result.cycled = {}
    for _, k in ipairs({ options.next, options.next, options.next, options.prev }) do
      keys(k)
      snapshot("cycle")
      result.cycled[#result.cycled + 1] = result.cycle.ghost or vim.NIL
    end
    keys(options.accept)
    snapshot("accepted_cycled")
    keys("<Esc>")
  end)
end)
