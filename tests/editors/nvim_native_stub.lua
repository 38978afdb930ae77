-- Neovim 0.12's own ghost text (vim.lsp.inline_completion) cannot run here (no
-- 0.12 build), so this stands a recording stub in for that module on 0.11 and
-- checks the plugin's wiring: enable() for each attached buffer, <Tab> calls
-- get() and falls back to a real Tab when get() accepted nothing.
local env = vim.env
local calls = { enable = {}, get = 0 }
local get_returns = false
vim.lsp.inline_completion = {
  enable = function(on, filter) table.insert(calls.enable, { on = on, bufnr = filter and filter.bufnr }) end,
  get = function(opts) calls.get = calls.get + 1; calls.get_bufnr = opts and opts.bufnr; return get_returns end,
}
local result = {}
local function finish(ok, message)
  result.ok, result.error, result.calls = ok, message, calls
  local f = assert(io.open(env.DLLM_RESULT, "w"))
  f:write(vim.fn.json_encode(result))
  f:close()
  vim.cmd(ok and "qall!" or "cquit 1")
end

local ok, err = xpcall(function()
  vim.opt.runtimepath:prepend(env.DLLM_PLUGIN)
  vim.cmd("filetype on")
  require("dllm").setup({ cmd = vim.fn.json_decode(env.DLLM_CMD) })
  vim.cmd("edit " .. vim.fn.fnameescape(env.DLLM_FILE))
  local buf = vim.api.nvim_get_current_buf()
  result.bufnr = buf
  assert(vim.wait(20000, function() return require("dllm.lsp").client(buf) ~= nil end, 50), "no client attached")
  result.native = require("dllm.ghost").native
  local accept = vim.fn.maparg("<Tab>", "i", false, true).callback
  get_returns = false
  accept()
  result.fallback_key = vim.fn.getcharstr(0) -- what the mapping fed back
  get_returns = true
  accept()
  result.after_accept_key = vim.fn.getcharstr(0)
end, debug.traceback)
finish(ok, not ok and tostring(err) or nil)
