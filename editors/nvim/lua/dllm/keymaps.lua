-- Buffer-local insert-mode keys for ghost text. A key with nothing to act on
-- does what it did before, so <Tab> still indents without a suggestion.
local config = require("dllm.config")
local ghost = require("dllm.ghost")

local M = {}

local function feed(key)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(key, true, false, true), "n", false)
end

-- `key` runs `act(bufnr)`; when that finds nothing to act on, the key does what it did before.
local function map(bufnr, key, act, desc)
  if key then
    vim.keymap.set("i", key, function()
      if not act(bufnr) then
        feed(key)
      end
    end, { buffer = bufnr, desc = desc })
  end
end

function M.attach(bufnr)
  local keys = config.options.keymaps
  map(bufnr, keys.accept, ghost.accept, "dllm: accept ghost text")
  map(bufnr, keys.accept_word, ghost.accept_word, "dllm: accept the ghost text's next word")
  map(bufnr, keys.accept_line, ghost.accept_line, "dllm: accept the ghost text's next line")
  map(bufnr, keys.suggest, ghost.suggest, "dllm: suggest now (best of N)")
  map(bufnr, keys.next, function(b) return ghost.cycle(b, 1) end, "dllm: next suggestion")
  map(bufnr, keys.prev, function(b) return ghost.cycle(b, -1) end, "dllm: previous suggestion")
  map(bufnr, keys.dismiss, ghost.dismiss, "dllm: dismiss ghost text")
end

return M
