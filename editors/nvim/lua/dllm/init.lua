-- dllm-lsp for Neovim 0.7+: require("dllm").setup{} starts `python -m dllm_lsp
-- serve` for the configured filetypes, shows ghost text, and adds :Dllm*
-- commands. The client stays thin: every decision is the server's.
local M = {}

function M.setup(opts)
  require("dllm.config").set(opts)
  require("dllm.commands").setup()
  require("dllm.lsp").setup()
end

function M.accept()
  return require("dllm.ghost").accept()
end

function M.accept_word()
  return require("dllm.ghost").accept_word()
end

function M.accept_line()
  return require("dllm.ghost").accept_line()
end

function M.dismiss()
  return require("dllm.ghost").dismiss()
end

function M.statusline()
  return require("dllm.status").statusline()
end

return M
