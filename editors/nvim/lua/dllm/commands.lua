-- User commands forwarding to the server's workspace/executeCommand names
-- (dllm.regenerateSelection, dllm.fillHoles, dllm.toggleCompletions,
-- dllm.restartEngine, dllm.engineStatus). Edits come back from the server as
-- workspace/applyEdit, which Neovim applies itself.
local lsp = require("dllm.lsp")
local status = require("dllm.status")

-- The last command's answer, {command, result, err}, for scripts and tests.
local M = { last = nil }

local function execute(command, arguments, on_result)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = lsp.client(bufnr)
  if not client then
    vim.notify("dllm: no dllm language server attached to this buffer", vim.log.levels.WARN)
    return
  end
  local params = { command = command, arguments = arguments }
  lsp.request(client, "workspace/executeCommand", params, function(err, result)
    M.last = { command = command, result = result, err = err }
    if err then
      vim.notify("dllm: " .. command .. " failed: " .. tostring(err.message or err), vim.log.levels.ERROR)
    elseif on_result then
      on_result(result)
    end
  end, bufnr)
end
M.execute = execute

-- An LSP range for a command's line range, or for the characterwise visual
-- selection when the command was run from one.
local function range_of(opts, client)
  local bufnr = vim.api.nvim_get_current_buf()
  local srow, scol, erow, ecol = opts.line1 - 1, 0, opts.line2 - 1, nil
  local vstart, vend = vim.api.nvim_buf_get_mark(bufnr, "<"), vim.api.nvim_buf_get_mark(bufnr, ">")
  local charwise = opts.range == 2 and vim.fn.visualmode() == "v"
    and vstart[1] == opts.line1 and vend[1] == opts.line2
  local last = vim.api.nvim_buf_get_lines(bufnr, erow, erow + 1, true)[1]
  if charwise then
    scol = vstart[2]
    -- '> marks the last selected character; the LSP end is exclusive.
    local char = vim.fn.matchstr(last:sub(vend[2] + 1), ".")
    ecol = math.min(vend[2] + math.max(#char, 1), #last)
  else
    ecol = #last
  end
  local enc = client.offset_encoding
  return {
    start = { line = srow, character = vim.lsp.util.character_offset(bufnr, srow, scol, enc) },
    ["end"] = { line = erow, character = vim.lsp.util.character_offset(bufnr, erow, ecol, enc) },
  }
end

function M.setup()
  local create = vim.api.nvim_create_user_command
  create("DllmRegenerate", function(opts)
    local client = lsp.client(0)
    if not client then
      return execute("dllm.regenerateSelection", {}) -- reports the missing client
    end
    execute("dllm.regenerateSelection", { vim.uri_from_bufnr(0), range_of(opts, client) })
  end, { range = true, desc = "dllm: regenerate the selected lines or characters" })
  create("DllmFillHoles", function()
    execute("dllm.fillHoles", { vim.uri_from_bufnr(0) })
  end, { desc = "dllm: fill every hole in this file" })
  create("DllmToggle", function(opts)
    local args = {}
    if opts.args == "on" then
      args = { true }
    elseif opts.args == "off" then
      args = { false }
    end
    execute("dllm.toggleCompletions", args, function(result)
      vim.notify("dllm: completions " .. ((result and result.enabled) and "enabled" or "disabled"))
    end)
  end, { nargs = "?", complete = function() return { "on", "off" } end, desc = "dllm: toggle completions" })
  create("DllmRestartEngine", function()
    execute("dllm.restartEngine", {})
  end, { desc = "dllm: restart the model engine" })
  local next_edit = require("dllm.next_edit")
  create("DllmNextEdit", function()
    if not next_edit.request(0) then
      vim.notify("dllm: no dllm language server attached to this buffer", vim.log.levels.WARN)
    end
  end, { desc = "dllm: ask for the next edit now" })
  create("DllmAcceptEdit", function() next_edit.accept(0) end, { desc = "dllm: apply the next edit shown" })
  create("DllmRejectEdit", function() next_edit.reject(0) end, { desc = "dllm: dismiss the next edit shown" })
  create("DllmStatus", function()
    execute("dllm.engineStatus", {}, function(result)
      status.current = result or status.current
      vim.notify("dllm: " .. status.describe(result))
    end)
  end, { desc = "dllm: show the engine status" })
end

return M
