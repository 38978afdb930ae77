-- :checkhealth dllm
local M = {}

-- vim.health.start/ok/... on 0.10+, report_* before (0.7 has them in require("health")).
local function reporter()
  local h = vim.health or require("health")
  return {
    start = h.start or h.report_start,
    ok = h.ok or h.report_ok,
    warn = h.warn or h.report_warn,
    error = h.error or h.report_error,
    info = h.info or h.report_info,
  }
end

function M.check()
  local r = reporter()
  local config = require("dllm.config")
  local lsp = require("dllm.lsp")
  local ghost = require("dllm.ghost")

  r.start("dllm: Neovim")
  if vim.fn.has("nvim-0.7") == 1 then
    local v = vim.version()
    r.ok(string.format("Neovim %d.%d.%d", v.major, v.minor, v.patch))
  else
    r.error("Neovim 0.7 or later is required")
  end
  if vim.lsp.config and vim.lsp.enable then
    r.info("starts the server with vim.lsp.config / vim.lsp.enable")
  else
    r.info("starts the server with vim.lsp.start_client (Neovim < 0.11)")
  end
  r.info(ghost.native and "ghost text: vim.lsp.inline_completion (Neovim 0.12+)"
    or "ghost text: the plugin's extmarks (Neovim < 0.12)")

  r.start("dllm: server")
  local cmd = config.cmd(vim.fn.getcwd())
  local exe = cmd[1]
  if vim.fn.executable(exe) ~= 1 then
    r.error("not executable: " .. exe, { "set python = '/path/to/python' or cmd = {...} in require('dllm').setup{}" })
  else
    r.ok("command: " .. table.concat(cmd, " "))
    if not config.options.cmd then
      local out = vim.fn.system({ exe, "-c", "import dllm_lsp, sys; sys.stdout.write(dllm_lsp.__file__)" })
      if vim.v.shell_error == 0 then
        r.ok("dllm_lsp importable: " .. out)
      else
        r.error(exe .. " cannot import dllm_lsp", { "pip install dllm-lsp into that environment, or set python=" })
      end
    end
  end

  r.start("dllm: clients")
  local running = {}
  if vim.lsp.get_clients then
    running = vim.lsp.get_clients({ name = lsp.name })
  else
    for _, c in pairs(vim.lsp.get_active_clients()) do
      if c.name == lsp.name then
        running[#running + 1] = c
      end
    end
  end
  if #running == 0 then
    r.warn("no dllm client running", { "open a file of a configured filetype after require('dllm').setup{}" })
  end
  for _, c in ipairs(running) do
    local n = vim.tbl_count(c.attached_buffers or {})
    r.ok(string.format("client %d running, %d buffer(s) attached, offset encoding %s", c.id, n, c.offset_encoding))
  end
  local s = require("dllm.status").current
  if s then
    local report = (s.state == "error") and r.error or (s.state == "ready" and r.ok or r.info)
    report("engine: " .. require("dllm.status").describe(s))
  else
    r.info("no engine status received yet")
  end
end

return M
