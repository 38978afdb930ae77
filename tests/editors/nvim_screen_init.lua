-- init.lua of the Neovim under test in test_nvim_screen.py: the plugin as a
-- user would set it up, plus a statusline that shows the engine status.
vim.opt.runtimepath:prepend(vim.env.DLLM_PLUGIN)
vim.cmd("filetype on")
vim.o.swapfile = false
vim.o.laststatus = 2
vim.o.statusline = "%f %= %{luaeval('require(\"dllm\").statusline()')}"
vim.api.nvim_create_autocmd("User", { pattern = "DllmStatus", command = "redrawstatus" })
require("dllm").setup({ cmd = vim.fn.json_decode(vim.env.DLLM_CMD), ghost_text = { debounce_ms = 30 } })
