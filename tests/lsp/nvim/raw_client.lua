-- A raw LSP client test in headless Neovim (0.7.2 and 0.11): start dllm-lsp, edit a buffer,
-- ask for inline and ordinary completions, write what came back as JSON.
-- Uses only APIs present in both versions (vim.lsp.start_client, buf_request_sync).
local out_path = os.getenv("DLLM_OUT")
local result = { version = tostring(vim.version().major) .. "." .. tostring(vim.version().minor) }

local function finish(ok, err)
  result.ok = ok
  result.error = err
  local f = assert(io.open(out_path, "w"))
  f:write(vim.json.encode(result))
  f:close()
  vim.cmd(ok and "qall!" or "cquit 1")
end

local ok, err = pcall(function()
  vim.cmd("edit " .. os.getenv("DLLM_FILE"))
  local buf = vim.api.nvim_get_current_buf()
  local client_id = vim.lsp.start_client({
    name = "dllm",
    cmd = vim.json.decode(os.getenv("DLLM_CMD")),
    cmd_env = { PYTHONPATH = os.getenv("PYTHONPATH"), OMP_NUM_THREADS = "1" },
    init_options = vim.json.decode(os.getenv("DLLM_INIT")),
    root_dir = vim.fn.fnamemodify(os.getenv("DLLM_FILE"), ":h"),
  })
  assert(client_id, "start_client failed")
  vim.lsp.buf_attach_client(buf, client_id)
  local client
  assert(vim.wait(20000, function()
    client = vim.lsp.get_client_by_id(client_id)
    return client ~= nil and client.server_capabilities ~= nil and client.server_capabilities.completionProvider ~= nil
  end, 50), "the server did not initialize")
  result.encoding = client.offset_encoding
  result.inline_provider = client.server_capabilities.inlineCompletionProvider ~= nil

  -- Edit the buffer the way a user would: the client sends didChange.
  local line = '    return "é" + '
  vim.api.nvim_buf_set_lines(buf, 1, 2, false, { line })
  -- The cursor at the end of the line, as in Insert mode (Normal mode cannot sit past the last
  -- character), in the negotiated encoding.
  local col = #line
  if client.offset_encoding ~= "utf-8" then
    if vim.fn.has("nvim-0.11") == 1 then
      col = vim.str_utfindex(line, "utf-16", #line)
    else
      local _, utf16 = vim.str_utfindex(line, #line)
      col = utf16
    end
  end
  local params = { textDocument = { uri = vim.uri_from_bufnr(buf) }, position = { line = 1, character = col } }
  result.position = params.position

  local inline_params = vim.deepcopy(params)
  inline_params.context = { triggerKind = 1 }
  local responses = vim.lsp.buf_request_sync(buf, "textDocument/inlineCompletion", inline_params, 15000)
  local r = responses and responses[client_id]
  assert(r and not r.err, "inline completion failed: " .. vim.inspect(r))
  result.inline = r.result

  responses = vim.lsp.buf_request_sync(buf, "textDocument/completion", params, 15000)
  r = responses and responses[client_id]
  assert(r and not r.err, "completion failed: " .. vim.inspect(r))
  result.completion = r.result
end)
finish(ok, ok and nil or tostring(err))
