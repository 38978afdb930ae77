-- Starting the server and attaching it to buffers, on every supported Neovim:
-- vim.lsp.config / vim.lsp.enable on 0.11+, vim.lsp.start_client plus a
-- FileType autocmd on 0.7-0.10. Also small shims over APIs that changed.
local config = require("dllm.config")
local status = require("dllm.status")

local M = { name = "dllm" }

local has = function(feature)
  return vim.fn.has(feature) == 1
end
M.has = has

-- client:request() is a method from 0.11 on; client.request() before (and
-- deprecated after).
function M.request(client, method, params, handler, bufnr)
  if has("nvim-0.11") then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

-- The same for client:notify() (a method from 0.11 on).
function M.notify(client, method, params)
  if has("nvim-0.11") then
    return client:notify(method, params)
  end
  return client.notify(method, params)
end

function M.client(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  if vim.lsp.get_clients then
    return vim.lsp.get_clients({ bufnr = bufnr, name = M.name })[1]
  end
  for _, client in pairs(vim.lsp.buf_get_clients(bufnr)) do
    if client.name == M.name then
      return client
    end
  end
end

-- Upward search for a root marker; vim.fs.root is 0.10+, so use finddir/findfile.
local function root_dir(bufnr)
  local path = vim.api.nvim_buf_get_name(bufnr)
  local start = path ~= "" and vim.fn.fnamemodify(path, ":p:h") or vim.fn.getcwd()
  for _, marker in ipairs(config.options.root_markers) do
    local hit = vim.fn.finddir(marker, start .. ";")
    if hit == "" then
      hit = vim.fn.findfile(marker, start .. ";")
    end
    if hit ~= "" then
      local full = (vim.fn.fnamemodify(hit, ":p"):gsub("/$", ""))
      return vim.fn.fnamemodify(full, ":h")
    end
  end
  return start
end

local function handlers()
  return { ["dllm/status"] = status.handler }
end

-- on_attach: ghost text, completion source and mappings for this buffer.
local function on_attach(client, bufnr)
  require("dllm.ghost").attach(client, bufnr)
  require("dllm.next_edit").attach(client, bufnr)
  require("dllm.cursor_rest").attach(client, bufnr)
  if has("nvim-0.11") then
    vim.lsp.completion.enable(true, client.id, bufnr, { autotrigger = false })
  else
    vim.bo[bufnr].omnifunc = "v:lua.vim.lsp.omnifunc"
  end
  require("dllm.keymaps").attach(bufnr)
end

-- 0.7-0.10: one client per root, attached to each buffer of a known filetype.
local clients = {}

function M.attach_legacy(bufnr)
  local opts = config.options
  local root = root_dir(bufnr)
  local id = clients[root]
  if not id or not vim.lsp.get_client_by_id(id) then
    id = vim.lsp.start_client({
      name = M.name,
      cmd = config.cmd(root),
      cmd_env = opts.cmd_env,
      root_dir = root,
      init_options = opts.settings,
      settings = { dllm = opts.settings },
      handlers = handlers(),
      on_attach = on_attach,
    })
    if not id then
      vim.notify("dllm: could not start " .. table.concat(config.cmd(root), " "), vim.log.levels.ERROR)
      return
    end
    clients[root] = id
  end
  vim.lsp.buf_attach_client(bufnr, id)
end

function M.setup()
  local opts = config.options
  if vim.lsp.config and vim.lsp.enable then
    vim.lsp.config(M.name, {
      cmd = config.cmd(vim.fn.getcwd()),
      cmd_env = opts.cmd_env,
      filetypes = opts.filetypes,
      root_markers = opts.root_markers,
      init_options = opts.settings,
      settings = { dllm = opts.settings },
      handlers = handlers(),
      on_attach = on_attach,
    })
    vim.lsp.enable(M.name)
    return
  end
  local group = vim.api.nvim_create_augroup("dllm_lsp", { clear = true })
  vim.api.nvim_create_autocmd("FileType", {
    group = group,
    pattern = opts.filetypes,
    callback = function(args)
      M.attach_legacy(args.buf)
    end,
  })
  -- Buffers opened before setup() have had their FileType event already.
  for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(bufnr) and vim.tbl_contains(opts.filetypes, vim.bo[bufnr].filetype) then
      M.attach_legacy(bufnr)
    end
  end
end

return M
