-- Ghost text from the server's textDocument/inlineCompletion.
-- On 0.12+ Neovim draws it itself (vim.lsp.inline_completion); before that this
-- module asks after a pause in typing and shows the first item as extmark
-- virtual text: the rest of the cursor line inline, further lines as virt_lines.
local config = require("dllm.config")
local lsp = require("dllm.lsp")
local overlay = require("dllm.overlay")

local M = {}
-- Per buffer: { client_id, timer, item = the ghost {row, start_col, end_col, cursor_col, text, shown} }.
local marks = overlay.new("dllm_ghost")
local ns = marks.namespace
local byte_col = overlay.byte_col

M.native = vim.lsp.inline_completion ~= nil and vim.lsp.inline_completion.enable ~= nil
M.namespace = ns

function M.clear(bufnr)
  marks:clear(bufnr)
end

function M.visible(bufnr)
  if M.native then
    return false -- Neovim tracks its own item
  end
  return marks:item(bufnr) ~= nil
end

-- The text shown, for tests and statuslines.
function M.shown(bufnr)
  local ghost = marks:item(bufnr)
  return ghost and ghost.shown or nil
end

local function draw(bufnr, ghost)
  local hl = config.options.ghost_text.hl_group
  local lines = vim.split(ghost.shown, "\n", { plain = true })
  local virt_lines = {}
  for i = 2, #lines do
    virt_lines[#virt_lines + 1] = { { lines[i], hl } }
  end
  local line = vim.api.nvim_buf_get_lines(bufnr, ghost.row, ghost.row + 1, true)[1]
  local opts = { virt_text = { { lines[1], hl } }, hl_mode = "combine" }
  if #virt_lines > 0 then
    opts.virt_lines = virt_lines
  end
  if lsp.has("nvim-0.10") then
    opts.virt_text_pos = "inline" -- pushes the rest of the line right
  elseif ghost.cursor_col >= #line then
    opts.virt_text_pos = "overlay"
  else
    opts.virt_text_pos = "eol" -- no inline virtual text before 0.10
  end
  vim.api.nvim_buf_clear_namespace(bufnr, ns, 0, -1)
  vim.api.nvim_buf_set_extmark(bufnr, ns, ghost.row, ghost.cursor_col, opts)
end

-- Turn an item of a response into a ghost for the cursor at (row, col), or nil.
local function ghost_from(item, bufnr, row, col, encoding)
  if not item or item.insertText == nil then
    return nil
  end
  local text = type(item.insertText) == "table" and item.insertText.value or item.insertText
  local line = vim.api.nvim_buf_get_lines(bufnr, row, row + 1, true)[1]
  local start_col, end_col = col, col
  if item.range then
    if item.range.start.line ~= row or item.range["end"].line ~= row then
      return nil -- multi-line replacements are not shown as ghost text
    end
    start_col = byte_col(line, item.range.start.character, encoding)
    end_col = byte_col(line, item.range["end"].character, encoding)
  end
  -- What is typed between the item's start and the cursor is not ghost.
  local typed = line:sub(start_col + 1, col)
  if start_col > col or text:sub(1, #typed) ~= typed then
    return nil
  end
  local shown = text:sub(#typed + 1)
  if shown == "" then
    return nil
  end
  return { row = row, start_col = start_col, end_col = math.max(end_col, col), cursor_col = col, text = text, shown = shown }
end

-- `invoked`: the user asked (the suggest key), not a pause in typing.
-- `step`: asked for by the cycling keys (1 next, -1 previous): the answer's best was on screen
-- already, so the one after (or before) it is shown.
function M.request(bufnr, invoked, step)
  local b = marks.buffers[bufnr]
  local client = b and vim.lsp.get_client_by_id(b.client_id)
  if not client or not vim.api.nvim_get_mode().mode:match("^i") then
    return
  end
  local win = vim.api.nvim_get_current_win()
  local params = vim.lsp.util.make_position_params(win, client.offset_encoding)
  params.context = { triggerKind = invoked and 1 or 2 } -- Invoked / Automatic
  local tick = vim.api.nvim_buf_get_changedtick(bufnr)
  local cursor = vim.api.nvim_win_get_cursor(win)
  lsp.request(client, "textDocument/inlineCompletion", params, function(err, result)
    -- Drop stale answers: the user typed or moved meanwhile.
    if err or vim.api.nvim_get_current_buf() ~= bufnr
      or vim.api.nvim_buf_get_changedtick(bufnr) ~= tick
      or not vim.deep_equal(vim.api.nvim_win_get_cursor(0), cursor)
      or not vim.api.nvim_get_mode().mode:match("^i") then
      return
    end
    -- The first item is shown; the others (best of N's other fills) are a key away (M.cycle).
    local ghosts = {}
    for _, item in ipairs(result and (result.items or result) or {}) do
      ghosts[#ghosts + 1] = ghost_from(item, bufnr, cursor[1] - 1, cursor[2], client.offset_encoding)
    end
    if #ghosts > 0 then
      local index = ((step or 0) % #ghosts) + 1
      b.item, b.items, b.index = ghosts[index], ghosts, index
      draw(bufnr, ghosts[index])
    end
  end, bufnr)
end

local function schedule(bufnr)
  local b = marks.buffers[bufnr]
  if b and b.partial_tick == vim.api.nvim_buf_get_changedtick(bufnr) then
    return -- the change was a partial accept: its rest is shown already, as the server would answer
  end
  marks:debounce(bufnr, config.options.ghost_text.debounce_ms, function() M.request(bufnr) end)
end

-- Ask now, as the user's own request; false when Neovim draws ghost text itself
-- (0.12+) or no server is attached to the buffer.
function M.suggest(bufnr, step)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  if M.native or not marks.buffers[bufnr] then
    return false
  end
  marks.buffers[bufnr].timer:stop() -- a pending automatic request is superseded
  M.request(bufnr, true, step)
  return true
end

-- Insert the shown item; false when there was nothing to accept.
function M.accept(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  if M.native then
    -- Truthy when a candidate was accepted (0.12 release; a nil from it means
    -- "nothing shown", so the mapping falls back to its own key).
    return vim.lsp.inline_completion.get({ bufnr = bufnr }) and true or false
  end
  local ghost = marks:item(bufnr)
  if not ghost then
    return false
  end
  M.clear(bufnr)
  local lines = vim.split(ghost.text, "\n", { plain = true })
  vim.api.nvim_buf_set_text(bufnr, ghost.row, ghost.start_col, ghost.row, ghost.end_col, lines)
  local last_col = #lines == 1 and ghost.start_col + #lines[1] or #lines[#lines]
  vim.api.nvim_win_set_cursor(0, { ghost.row + #lines, last_col })
  return true
end

-- The next word of a ghost (its leading blanks and line break included): a run of word
-- characters, else of other non-blanks, as VS Code's and Copilot's accept-word take it.
local function next_word(shown)
  return shown:match("^%s*[%w_]+") or shown:match("^%s*[^%w_%s]+") or shown
end

-- The rest of the cursor's line, or, when the ghost starts on the next line, that line.
local function next_line(shown)
  return shown:match("^[^\n]+") or shown:match("^\n[^\n]*") or shown
end

-- Insert the part of the shown ghost that `take` picks; the rest stays shown where the cursor
-- is now (the server answers the editor's next request there from its suggestion cache, the
-- same rest). False when there is nothing shown (the key does what it did before).
local function accept_part(bufnr, take)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  if M.native then
    return false -- 0.12's own ghost text has no partial accept
  end
  local ghost = marks:item(bufnr)
  if not ghost then
    return false
  end
  local part = take(ghost.shown)
  if part == ghost.shown then
    return M.accept(bufnr)
  end
  local lines = vim.split(part, "\n", { plain = true })
  vim.api.nvim_buf_set_text(bufnr, ghost.row, ghost.cursor_col, ghost.row, ghost.cursor_col, lines)
  local row = ghost.row + #lines - 1
  local col = #lines == 1 and ghost.cursor_col + #part or #lines[#lines]
  local rest = ghost.shown:sub(#part + 1)
  -- The text after the cursor (closers the item replaces) moved with it.
  local after = { row = row, start_col = col, cursor_col = col, end_col = col + ghost.end_col - ghost.cursor_col,
                  text = rest, shown = rest }
  marks.buffers[bufnr].item = after
  marks.buffers[bufnr].partial_tick = vim.api.nvim_buf_get_changedtick(bufnr)
  draw(bufnr, after)
  vim.api.nvim_win_set_cursor(0, { row + 1, col })
  return true
end

function M.accept_word(bufnr)
  return accept_part(bufnr, next_word)
end

function M.accept_line(bufnr)
  return accept_part(bufnr, next_line)
end

-- Show the next (`step` 1) or previous (-1) of the suggestions the server offered here. With
-- only one, ask for more: an explicit request, which the server fills best of N and answers
-- with the other fills too (as Copilot's cycling keys do). False where Neovim draws its own.
function M.cycle(bufnr, step)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  if M.native then
    return false
  end
  local b = marks.buffers[bufnr]
  if not b then
    return false
  end
  if not b.item or not b.items or #b.items < 2 or b.items[b.index] ~= b.item then
    return M.suggest(bufnr, step)
  end
  b.index = (b.index - 1 + step) % #b.items + 1
  b.item = b.items[b.index]
  draw(bufnr, b.item)
  return true
end

function M.dismiss(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local was = M.visible(bufnr)
  M.clear(bufnr)
  return was
end

function M.attach(client, bufnr)
  if not config.options.ghost_text.enabled then
    return
  end
  if M.native then
    vim.lsp.inline_completion.enable(true, { bufnr = bufnr })
    return
  end
  local _, new = marks:attach(bufnr, client.id)
  if not new then
    return
  end
  local group = vim.api.nvim_create_augroup("dllm_ghost_" .. bufnr, { clear = true })
  vim.api.nvim_create_autocmd({ "TextChangedI", "InsertEnter" }, {
    group = group, buffer = bufnr, callback = function() schedule(bufnr) end,
  })
  vim.api.nvim_create_autocmd("CursorMovedI", {
    group = group, buffer = bufnr,
    callback = function()
      local ghost = marks:item(bufnr)
      local cursor = vim.api.nvim_win_get_cursor(0)
      if ghost and (cursor[1] - 1 ~= ghost.row or cursor[2] ~= ghost.cursor_col) then
        M.clear(bufnr)
      end
    end,
  })
  vim.api.nvim_create_autocmd({ "InsertLeave", "BufLeave" }, {
    group = group, buffer = bufnr,
    callback = function()
      marks.buffers[bufnr].timer:stop()
      M.clear(bufnr)
    end,
  })
  vim.api.nvim_create_autocmd("BufWipeout", {
    group = group, buffer = bufnr,
    callback = function() marks:detach(bufnr) end,
  })
end

return M
