-- The engine status pushed by the server's `dllm/status` notification
-- ({state, model, lastLatencyMs, message}), kept for the statusline and
-- :checkhealth. Fires `User DllmStatus` so a statusline plugin can redraw.
local M = { current = nil }

function M.handler(_, result, _)
  M.current = result
  pcall(vim.api.nvim_exec_autocmds, "User", { pattern = "DllmStatus", modeline = false })
end

-- A short text for a statusline, e.g. "dllm: ready 42ms".
function M.statusline()
  local s = M.current
  if not s then
    return ""
  end
  local text = "dllm: " .. tostring(s.state)
  if type(s.lastLatencyMs) == "number" then
    text = text .. string.format(" %dms", s.lastLatencyMs)
  end
  return text
end

function M.describe(s)
  s = s or M.current
  if not s then
    return "no status received from the server yet"
  end
  local parts = { "state=" .. tostring(s.state), "model=" .. tostring(s.model) }
  if type(s.lastLatencyMs) == "number" then
    parts[#parts + 1] = string.format("lastLatencyMs=%.0f", s.lastLatencyMs)
  end
  if type(s.message) == "string" and s.message ~= "" then
    parts[#parts + 1] = "message=" .. s.message
  end
  return table.concat(parts, " ")
end

return M
