-- Drives the plugin's next edits headless (Neovim 0.7 to 0.11) and writes what it saw
-- as JSON for test_nvim_next_edit.py: a rename at the definition, :DllmNextEdit's
-- request, the extmarks (old text struck through, the new line as a virtual line),
-- the jump key, the accept key and the buffer after it.
-- Environment: DLLM_PLUGIN, DLLM_CMD, DLLM_SETTINGS, DLLM_FILE, DLLM_RESULT, DLLM_TIMEOUT_MS.
local env = vim.env
local result = { steps = {} }
local timeout = tonumber(env.DLLM_TIMEOUT_MS or "20000")

local function finish(ok, message)
  result.ok = ok
  result.error = message
  local f = assert(io.open(env.DLLM_RESULT, "w"))
  f:write(vim.fn.json_encode(result))
  f:close()
  vim.cmd(ok and "qall!" or "cquit 1")
end

local function lines()
  return vim.api.nvim_buf_get_lines(0, 0, -1, true)
end

vim.opt.runtimepath:prepend(env.DLLM_PLUGIN)
vim.cmd("filetype on")
vim.o.swapfile = false

require("dllm").setup({
  cmd = vim.fn.json_decode(env.DLLM_CMD),
  settings = vim.fn.json_decode(env.DLLM_SETTINGS),
  ghost_text = { enabled = false },
  next_edit = { auto = false },
})
vim.cmd("edit " .. vim.fn.fnameescape(env.DLLM_FILE))
local lsp = require("dllm.lsp")
local status = require("dllm.status")
local next_edit = require("dllm.next_edit")
result.version = tostring(vim.version().major) .. "." .. tostring(vim.version().minor)

local ok, err = pcall(function()
  if not vim.wait(timeout, function() return lsp.client(0) ~= nil end, 50) then
    error("no dllm client attached")
  end
  vim.wait(timeout, function() return status.current ~= nil and status.current.state == "ready" end, 50)
  result.status = status.current
  -- The user renames `w` to `width` at the definition.
  vim.api.nvim_buf_set_text(0, 0, 9, 0, 10, { "width" })
  local done, proposal = false, nil
  vim.cmd("DllmNextEdit")
  -- :DllmNextEdit draws through the same request; wait for what it drew.
  vim.wait(timeout, function() return next_edit.shown(0) ~= nil end, 50)
  proposal = next_edit.shown(0)
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
  result.buffer_after_accept = lines()
  result.marks_after_accept = #vim.api.nvim_buf_get_extmarks(0, next_edit.namespace, 0, -1, {})
  result.shown_after_accept = next_edit.shown(0) ~= nil
end)
finish(ok, not ok and tostring(err) or nil)
