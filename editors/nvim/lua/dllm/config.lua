-- Options of require("dllm").setup{}, their defaults, and the server command.
-- Server behaviour is configured by `settings`, sent untouched as the LSP
-- initializationOptions (camelCase, see the server's contract): the plugin
-- does not interpret them, so the server's defaults stay the single source.
local M = {}

M.defaults = {
  -- Full server command; nil = { <python>, "-m", "dllm_lsp", "serve" }.
  cmd = nil,
  -- Python that can `import dllm_lsp`; nil = discover (see M.python()).
  python = nil,
  -- Extra environment variables for the server process.
  cmd_env = nil,
  filetypes = {
    "python", "javascript", "javascriptreact", "typescript", "typescriptreact",
    "go", "rust", "c", "cpp", "java",
  },
  root_markers = { "pyproject.toml", "setup.py", "package.json", "go.mod", "Cargo.toml", ".git" },
  -- initializationOptions, e.g. { engine = { mode = "daemon" }, debounceMs = 50 }.
  settings = {},
  ghost_text = {
    enabled = true,
    -- Ask the server after this many ms without typing (the server debounces too).
    debounce_ms = 100,
    hl_group = "Comment",
  },
  -- Insert-mode keys; false disables one. Without a ghost text, the key does
  -- what it did before (accept falls back to its own key).
  keymaps = {
    accept = "<Tab>",
    -- Take only the next word / the next line of it; the rest stays shown (as Copilot's keys).
    accept_word = "<M-Right>",
    accept_line = "<M-C-Right>",
    dismiss = "<C-]>",
    -- Ask for a suggestion now: an explicit request, which the server fills best of N
    -- (settings.diffusion.invokedCandidates); before 0.12 only (0.12 draws its own).
    suggest = "<M-\\>",
    -- The next / previous of the suggestions offered here; with only one, ask for more (an
    -- explicit request: best of N, whose other fills come as further suggestions).
    next = "<M-]>",
    prev = "<M-[>",
    -- Normal-mode keys for a next-edit proposal (see next_edit.lua).
    accept_edit = "<Tab>",
    jump_edit = "<S-Tab>",
    reject_edit = false,
  },
  -- Where the cursor rests (Normal mode: its line's end, where `A` and `o` type; Insert mode:
  -- after a cursor key), the server encodes a completion's context before you type there, so
  -- the first suggestion comes sooner. Costs CPU while you move around; the server also needs
  -- settings.prepareAtCursor (default true) and never does it for an OpenAI endpoint.
  prepare_at_cursor = {
    enabled = true,
    rest_ms = 250, -- how long the cursor stays before its place is sent
  },
  -- Next edits: the server must have settings.nextEdit.enabled = true to propose any.
  next_edit = {
    auto = true, -- ask after each pause in typing (else only :DllmNextEdit)
    debounce_ms = 300,
  },
}

M.options = vim.deepcopy(M.defaults)

function M.set(opts)
  M.options = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts or {})
  if next(M.options.settings) == nil then
    M.options.settings = vim.empty_dict() -- a JSON object, not [], for the server
  end
  return M.options
end

local function executable(path)
  return path and path ~= "" and vim.fn.executable(path) == 1
end

local function venv_python(dir)
  for _, rel in ipairs({ "/bin/python", "/Scripts/python.exe" }) do
    if executable(dir .. rel) then
      return dir .. rel
    end
  end
end

-- The project's own environment first, so the server is the one installed
-- next to the code: setup{python=}, ./.venv or ./venv under the root,
-- $VIRTUAL_ENV, then python3/python on PATH.
function M.python(root)
  local opts = M.options
  if opts.python then
    return opts.python
  end
  root = root or vim.fn.getcwd()
  for _, name in ipairs({ ".venv", "venv" }) do
    local found = venv_python(root .. "/" .. name)
    if found then
      return found
    end
  end
  local env = vim.env.VIRTUAL_ENV
  if env and env ~= "" then
    local found = venv_python(env)
    if found then
      return found
    end
  end
  for _, name in ipairs({ "python3", "python" }) do
    if executable(name) then
      return vim.fn.exepath(name)
    end
  end
  return "python3"
end

function M.cmd(root)
  if M.options.cmd then
    return M.options.cmd
  end
  return { M.python(root), "-m", "dllm_lsp", "serve" }
end

return M
