-- What ghost text and next edits share: an extmark namespace with per-buffer state
-- (the client, a debounce timer, the item shown), clearing it, asking again after a
-- pause in typing, and LSP character offsets to byte columns. Runs on Neovim 0.7+.
local lsp = require("dllm.lsp")

local M = {}
local uv = vim.uv or vim.loop

-- The buffer number for nil or 0 (the current buffer), as the public functions take it.
function M.buf(bufnr)
  return (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
end

-- LSP character offsets (in the client's encoding) to byte columns.
function M.byte_col(line, character, encoding)
  if encoding == "utf-8" then
    return math.min(character, #line)
  end
  local ok, col
  if lsp.has("nvim-0.11") then
    ok, col = pcall(vim.str_byteindex, line, encoding, character, false)
  else
    ok, col = pcall(vim.str_byteindex, line, character, encoding == "utf-16")
  end
  return ok and col or #line
end

local Overlay = {}
Overlay.__index = Overlay

-- One namespace named `name`; `buffers[bufnr]` is { client_id, timer, item }.
function M.new(name)
  return setmetatable({ namespace = vim.api.nvim_create_namespace(name), buffers = {} }, Overlay)
end

-- The buffer's state, made on first attach; the second value says it is new.
function Overlay:attach(bufnr, client_id)
  local b = self.buffers[bufnr]
  if b then
    b.client_id = client_id
    return b, false
  end
  b = { client_id = client_id, timer = uv.new_timer() }
  self.buffers[bufnr] = b
  return b, true
end

-- The item shown in the buffer (nil for none).
function Overlay:item(bufnr)
  local b = self.buffers[M.buf(bufnr)]
  return b and b.item or nil
end

function Overlay:clear(bufnr)
  bufnr = M.buf(bufnr)
  local b = self.buffers[bufnr]
  if b then
    b.item = nil
  end
  if vim.api.nvim_buf_is_valid(bufnr) then
    vim.api.nvim_buf_clear_namespace(bufnr, self.namespace, 0, -1)
  end
end

-- Drop what is shown and run `fn` after `ms` without another call (each keystroke restarts it).
function Overlay:debounce(bufnr, ms, fn)
  local b = self.buffers[bufnr]
  self:clear(bufnr)
  b.timer:stop()
  b.timer:start(ms, 0, vim.schedule_wrap(function()
    if vim.api.nvim_buf_is_valid(bufnr) then
      fn()
    end
  end))
end

function Overlay:detach(bufnr)
  local b = self.buffers[bufnr]
  if b then
    b.timer:stop()
    b.timer:close()
    self.buffers[bufnr] = nil
  end
end

return M
