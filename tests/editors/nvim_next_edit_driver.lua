-- Drives the plugin's next edits headless (Neovim 0.7 to 0.11) and writes what it saw
-- as JSON for test_nvim_next_edit.py: a rename at the definition, :DllmNextEdit's
-- request, the extmarks (old text struck through, the new line as a virtual line),
-- the jump key, the accept key and the buffer after it.
-- Environment: as nvim_harness.lua reads it.
local H = dofile(debug.getinfo(1, "S").source:sub(2):match("(.*/)") .. "nvim_harness.lua")
local result, timeout = H.result, H.timeout

H.run(function()
  H.start({ ghost_text = { enabled = false }, next_edit = { auto = false } })
  local status = require("dllm.status")
  local next_edit = require("dllm.next_edit")
  H.wait_attached()
  vim.wait(timeout, function() return status.current ~= nil and status.current.state == "ready" end, 50)
  result.status = status.current
  -- The user renames `w` to `width` at the definition.
  vim.api.nvim_buf_set_text(0, 0, 9, 0, 10, { "width" })
  vim.cmd("DllmNextEdit")
  -- :DllmNextEdit draws through the same request; wait for what it drew.
  vim.wait(timeout, function() return next_edit.shown(0) ~= nil end, 50)
  local proposal = next_edit.shown(0)
  result.edits = proposal and proposal.edits or vim.NIL
  result.marks = {}
  for _, m in ipairs(vim.api.nvim_buf_get_extmarks(0, next_edit.namespace, 0, -1, { details = true })) do
    local d = m[4]
    local virt = {}
    for _, vl in ipairs(d.virt_lines or {}) do
      virt[#virt + 1] = vl[1][1]
    end
    result.marks[#result.marks + 1] = { row = m[2], col = m[3], end_row = d.end_row or vim.NIL,
                                        end_col = d.end_col or vim.NIL, hl = d.hl_group or vim.NIL, virt_lines = virt }
  end
  local old = vim.api.nvim_get_hl_by_name("DllmNextEditOld", true)
  result.strikethrough = old.strikethrough == true
  vim.api.nvim_win_set_cursor(0, { 1, 0 })
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("<S-Tab>", true, false, true), "x", false)
  result.cursor_after_jump = vim.api.nvim_win_get_cursor(0)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("<Tab>", true, false, true), "x", false)
  result.buffer_after_accept = H.lines()
  result.marks_after_accept = #vim.api.nvim_buf_get_extmarks(0, next_edit.namespace, 0, -1, {})
  result.shown_after_accept = next_edit.shown(0) ~= nil
  H.finish(true)
end)
