-- Where the cursor rests, sent as the server's `dllm/prepareCompletion`: the server has the
-- engine encode the context a completion at that place would carry, so the first keystroke's
-- request there finds it cached (the context starts with the text after the cursor, so a new
-- place shares nothing cached). The server decides the rest (settings.prepareAtCursor, off for
-- an OpenAI endpoint, stale versions, cancelling); this module only says where and when.
--   Normal mode: the end of the cursor's line, where `A` and `o` start typing (after `o` the
--     text after the cursor is the same as at that line's end), so moving along a line sends
--     nothing new.
--   Insert mode: the cursor itself, after a move that is not typing (a typed character's
--     requests carry their own context).
-- A place is sent once the cursor stayed `rest_ms` there, and not twice in a row.
local config = require("dllm.config")
local lsp = require("dllm.lsp")

local M = {}
local uv = vim.uv or vim.loop
local timer -- one for all buffers: only the current window's cursor can rest
local sent -- the last place sent, as a string

-- Per attached buffer: the changedtick at the previous Insert-mode event. A CursorMovedI
-- whose tick differs follows an edit: typing, not a move (whichever of CursorMovedI and
-- TextChangedI Neovim fires first for a keystroke; 0.7 and 0.11 fire CursorMovedI first).
local ticks = {}

-- The place to prepare in the current window, or nil where nothing is typed next.
local function place(bufnr, client)
  local mode = vim.api.nvim_get_mode().mode
  if mode ~= "n" and mode ~= "i" then
    return nil -- Visual, operator-pending, completion menus, ...
  end
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  local line = vim.api.nvim_buf_get_lines(bufnr, row - 1, row, false)[1] or ""
  col = mode == "n" and #line or math.min(col, #line)
  return {
    textDocument = { uri = vim.uri_from_bufnr(bufnr), version = vim.lsp.util.buf_versions[bufnr] },
    position = {
      line = row - 1,
      character = vim.lsp.util.character_offset(bufnr, row - 1, col, client.offset_encoding),
    },
  }
end

local function send(bufnr)
  local client = lsp.client(bufnr)
  if not client or vim.api.nvim_get_current_buf() ~= bufnr then
    return
  end
  local params = place(bufnr, client)
  if not params then
    return
  end
  local key = table.concat({ client.id, params.textDocument.uri, tostring(params.textDocument.version),
                             params.position.line, params.position.character }, "\0")
  if key ~= sent then
    sent = key
    lsp.notify(client, "dllm/prepareCompletion", params)
  end
end

local function wait(bufnr)
  timer:stop()
  timer:start(config.options.prepare_at_cursor.rest_ms, 0, vim.schedule_wrap(function()
    if vim.api.nvim_buf_is_valid(bufnr) then
      send(bufnr)
    end
  end))
end

-- True when the buffer changed since the previous Insert-mode event (the move was typing).
local function typed(bufnr)
  local tick = vim.api.nvim_buf_get_changedtick(bufnr)
  local changed = ticks[bufnr] ~= tick
  ticks[bufnr] = tick
  return changed
end

function M.attach(_, bufnr)
  local opts = config.options.prepare_at_cursor
  if not opts.enabled or ticks[bufnr] then
    return -- off, or attached already
  end
  timer = timer or uv.new_timer()
  ticks[bufnr] = vim.api.nvim_buf_get_changedtick(bufnr)
  local group = vim.api.nvim_create_augroup("dllm_cursor_rest_" .. bufnr, { clear = true })
  local function on(events, callback)
    vim.api.nvim_create_autocmd(events, { group = group, buffer = bufnr, callback = callback })
  end
  on("CursorMoved", function() wait(bufnr) end)
  on("CursorMovedI", function()
    if typed(bufnr) then
      timer:stop()
    else
      wait(bufnr)
    end
  end)
  on({ "InsertEnter", "TextChangedI", "TextChangedP" }, function()
    typed(bufnr)
    -- An edit that does not move the cursor (<Del>) is typing too: its requests carry the context.
    timer:stop()
  end)
  -- Back in Normal mode the cursor may not move (column 0), yet `o` may come next.
  on("InsertLeave", function() wait(bufnr) end)
  on("BufLeave", function() timer:stop() end)
  on("BufWipeout", function() ticks[bufnr] = nil end)
end

return M
