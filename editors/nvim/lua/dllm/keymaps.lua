-- Buffer-local insert-mode keys for ghost text. A key with nothing to act on
-- does what it did before, so <Tab> still indents without a suggestion.
local config = require("dllm.config")
local ghost = require("dllm.ghost")

local M = {}

local function feed(key)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(key, true, false, true), "n", false)
end

function M.attach(bufnr)
  local keys = config.options.keymaps
  if keys.accept then
    vim.keymap.set("i", keys.accept, function()
      if not ghost.accept(bufnr) then
        feed(keys.accept)
      end
    end, { buffer = bufnr, desc = "dllm: accept ghost text" })
  end
  if keys.suggest then
    vim.keymap.set("i", keys.suggest, function()
      if not ghost.suggest(bufnr) then
        feed(keys.suggest)
      end
    end, { buffer = bufnr, desc = "dllm: suggest now (best of N)" })
  end
  if keys.dismiss then
    vim.keymap.set("i", keys.dismiss, function()
      if not ghost.dismiss(bufnr) then
        feed(keys.dismiss)
      end
    end, { buffer = bufnr, desc = "dllm: dismiss ghost text" })
  end
end

return M
