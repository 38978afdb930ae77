-- A text screenshot of the plugin at work: this (outer, headless) Neovim runs
-- the Neovim under test in a :terminal and reads the terminal's screen, which
-- holds exactly what a person would see, ghost text and statusline included.
-- Environment: DLLM_INNER (JSON command of the Neovim under test), DLLM_RESULT.
local result = { screens = {} }
vim.o.columns, vim.o.lines = 72, 10
local buf = vim.api.nvim_get_current_buf()
local job = vim.fn.termopen(vim.fn.json_decode(vim.env.DLLM_INNER))

local function screen()
  return vim.api.nvim_buf_get_lines(buf, 0, -1, false)
end
local function shows(text, ms)
  return vim.wait(ms, function() return table.concat(screen(), "\n"):find(text, 1, true) ~= nil end, 50)
end
local function snap(name)
  result.screens[name] = screen()
end

result.ready = shows("dllm: ready", 20000)
snap("opened")
vim.fn.chansend(job, "2GA")
result.ghost_shown = shows(vim.env.DLLM_EXPECT, 10000)
snap("ghost")
vim.fn.chansend(job, "\t")
vim.wait(300)
vim.fn.chansend(job, "\27")
vim.wait(300)
snap("accepted")
vim.fn.chansend(job, ":wq\r")
result.exited = vim.wait(5000, function() return vim.fn.jobwait({ job }, 0)[1] ~= -1 end, 50)
local f = assert(io.open(vim.env.DLLM_RESULT, "w"))
f:write(vim.fn.json_encode(result))
f:close()
vim.cmd("qall!")
