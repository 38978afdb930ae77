-- Next-edit suggestions from the server's `dllm/nextEdit`: the text an edit would
-- replace is struck through and the lines as they would read are shown as
-- virtual lines under it. A key accepts (the edits are applied as the server
-- sent them, then `dllm/acceptEdit`), a key jumps to the edit, a key rejects
-- (`dllm/rejectEdit`). :DllmNextEdit asks at once. Every decision is the server's.
local config = require("dllm.config")
local lsp = require("dllm.lsp")
local overlay = require("dllm.overlay")

local M = {}
-- Per buffer: { client_id, timer, item = the proposal { version, edits, encoding, client_id } }.
local marks = overlay.new("dllm_next_edit")
local ns = marks.namespace
local byte_col = overlay.byte_col

M.namespace = ns

local function highlights()
  -- default = true (0.8+): a colour scheme's own definitions win; 0.7 has no such key.
  for name, spec in pairs({ DllmNextEditOld = { strikethrough = true, fg = "#cc6666" },
                            DllmNextEditNew = { link = "DiffAdd" } }) do
    if not pcall(vim.api.nvim_set_hl, 0, name, vim.tbl_extend("force", spec, { default = true })) then
      vim.api.nvim_set_hl(0, name, spec)
    end
  end
end

local function feed(key)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(key, true, false, true), "n", false)
end

function M.clear(bufnr)
  marks:clear(bufnr)
end

-- The proposal shown ({version, edits}), for tests and statuslines.
function M.shown(bufnr)
  return marks:item(bufnr)
end

-- Byte positions {srow, scol, erow, ecol} of an LSP range in the buffer.
local function span(bufnr, range, encoding)
  local srow, erow = range.start.line, range["end"].line
  local sline = vim.api.nvim_buf_get_lines(bufnr, srow, srow + 1, false)[1] or ""
  local eline = vim.api.nvim_buf_get_lines(bufnr, erow, erow + 1, false)[1] or ""
  return srow, byte_col(sline, range.start.character, encoding), erow, byte_col(eline, range["end"].character, encoding)
end

local function draw(bufnr, edits, encoding)
  vim.api.nvim_buf_clear_namespace(bufnr, ns, 0, -1)
  -- The new text of each edited line range, grouped per last row: the lines as they would read.
  local by_row = {}
  for _, edit in ipairs(edits) do
    local srow, scol, erow, ecol = span(bufnr, edit.range, encoding)
    vim.api.nvim_buf_set_extmark(bufnr, ns, srow, scol, {
      end_row = erow, end_col = ecol, hl_group = "DllmNextEditOld", hl_mode = "combine",
    })
    local first = vim.api.nvim_buf_get_lines(bufnr, srow, srow + 1, false)[1] or ""
    local last = vim.api.nvim_buf_get_lines(bufnr, erow, erow + 1, false)[1] or ""
    local key = srow
    local entry = by_row[key] or { srow = srow, erow = erow, head = first:sub(1, scol), tail = last:sub(ecol + 1), parts = {} }
    -- Several edits on one line: keep the text between them.
    if #entry.parts > 0 then
      entry.parts[#entry.parts + 1] = entry.gap_from and first:sub(entry.gap_from + 1, scol) or ""
    end
    entry.parts[#entry.parts + 1] = edit.newText
    entry.gap_from, entry.tail, entry.erow = ecol, last:sub(ecol + 1), erow
    by_row[key] = entry
  end
  for _, entry in pairs(by_row) do
    local text = entry.head .. table.concat(entry.parts) .. entry.tail
    local virt_lines = {}
    for _, line in ipairs(vim.split(text, "\n", { plain = true })) do
      virt_lines[#virt_lines + 1] = { { line, "DllmNextEditNew" } }
    end
    vim.api.nvim_buf_set_extmark(bufnr, ns, entry.erow, 0, { virt_lines = virt_lines })
  end
end

-- Ask the server for the next edit of this buffer's current version.
function M.request(bufnr, on_done)
  bufnr = overlay.buf(bufnr)
  local client = lsp.client(bufnr)
  if not client then
    return false
  end
  local version = vim.lsp.util.buf_versions[bufnr]
  local cursor = vim.api.nvim_win_get_cursor(0)
  local line = vim.api.nvim_buf_get_lines(bufnr, cursor[1] - 1, cursor[1], false)[1] or ""
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(bufnr), version = version },
    position = { line = cursor[1] - 1, character = vim.lsp.util.character_offset(bufnr, cursor[1] - 1, math.min(cursor[2], #line), client.offset_encoding) },
  }
  lsp.request(client, "dllm/nextEdit", params, function(err, result)
    -- A reply for an older version is dropped: the buffer moved on.
    if err or not vim.api.nvim_buf_is_valid(bufnr) or vim.lsp.util.buf_versions[bufnr] ~= version then
      if on_done then on_done(nil) end
      return
    end
    local b = marks:attach(bufnr, client.id)
    if type(result) ~= "table" or #result == 0 then
      M.clear(bufnr)
    else
      b.item = { version = version, edits = result, encoding = client.offset_encoding, client_id = client.id }
      draw(bufnr, result, client.offset_encoding)
    end
    if on_done then on_done(b.item) end
  end, bufnr)
  return true
end

local function notify(bufnr, method, proposal)
  local client = vim.lsp.get_client_by_id(proposal.client_id)
  if client then
    lsp.notify(client, method, { textDocument = { uri = vim.uri_from_bufnr(bufnr), version = proposal.version } })
  end
end

-- Apply the proposal shown; false when there is none for this version.
function M.accept(bufnr)
  bufnr = overlay.buf(bufnr)
  local proposal = M.shown(bufnr)
  if not proposal or vim.lsp.util.buf_versions[bufnr] ~= proposal.version then
    M.clear(bufnr)
    return false
  end
  M.clear(bufnr)
  notify(bufnr, "dllm/acceptEdit", proposal)
  vim.lsp.util.apply_text_edits(proposal.edits, bufnr, proposal.encoding)
  return true
end

function M.reject(bufnr)
  bufnr = overlay.buf(bufnr)
  local proposal = M.shown(bufnr)
  M.clear(bufnr)
  if proposal then
    notify(bufnr, "dllm/rejectEdit", proposal)
  end
  return proposal ~= nil
end

-- Move the cursor to the start of the proposal (it may be off-screen).
function M.jump(bufnr)
  bufnr = overlay.buf(bufnr)
  local proposal = M.shown(bufnr)
  if not proposal then
    return false
  end
  local srow, scol = span(bufnr, proposal.edits[1].range, proposal.encoding)
  vim.api.nvim_win_set_cursor(0, { srow + 1, scol })
  return true
end

-- After a pause in typing, ask for the next edit (the server computes it after each change).
local function schedule(bufnr)
  marks:debounce(bufnr, config.options.next_edit.debounce_ms, function() M.request(bufnr) end)
end

function M.attach(client, bufnr)
  highlights()
  local opts = config.options.next_edit
  local _, new = marks:attach(bufnr, client.id)
  local keys = config.options.keymaps
  local maps = { { keys.accept_edit, M.accept, "accept the next edit" }, { keys.jump_edit, M.jump, "jump to the next edit" },
                 { keys.reject_edit, M.reject, "reject the next edit" } }
  for _, map in ipairs(maps) do
    if map[1] then
      -- With no proposal shown the key does what it did before (<Tab> still jumps forward).
      vim.keymap.set("n", map[1], function()
        if not map[2](bufnr) then
          feed(map[1])
        end
      end, { buffer = bufnr, desc = "dllm: " .. map[3] })
    end
  end
  if new then -- once per buffer, however often a client attaches
    if opts.auto then
      vim.api.nvim_create_autocmd({ "TextChanged", "TextChangedI" }, {
        buffer = bufnr,
        callback = function() schedule(bufnr) end,
      })
    end
    vim.api.nvim_create_autocmd("BufWipeout", { buffer = bufnr, callback = function() marks:detach(bufnr) end })
  end
end

return M
