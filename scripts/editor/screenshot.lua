-- Neovim (built-in LSP client) with `tyr lsp`, set up for the README's screenshot: the file
-- TYR_FILE open, the server's diagnostic shown, the cursor at TYR_HOVER (LINE:COL) with its
-- hover open; then TYR_READY is written so that scripts/editor/screenshot.sh takes the picture.
local file = assert(os.getenv("TYR_FILE"))
local ready = assert(os.getenv("TYR_READY"))
local python = os.getenv("TYR_PYTHON") or "python3"
local l, c = assert(os.getenv("TYR_HOVER")):match("(%d+):(%d+)")

vim.o.number = true
vim.o.signcolumn = "yes"
vim.o.laststatus = 2
vim.o.termguicolors = true
vim.cmd("colorscheme default")
vim.cmd("highlight NormalFloat guibg=#313244 guifg=#e6e6f0")
vim.cmd("highlight FloatBorder guibg=#313244 guifg=#89b4fa")
vim.lsp.handlers["textDocument/hover"] = vim.lsp.with(vim.lsp.handlers.hover,
                                                      { border = "rounded" })
vim.diagnostic.config({ virtual_text = { prefix = "●" }, underline = true, signs = true })

local client = vim.lsp.start_client({
  name = "tyr", cmd = { python, "-m", "pytyr.cli", "lsp" }, root_dir = vim.fn.getcwd(),
  init_options = { debounceMs = 50 },
})
vim.cmd("edit " .. vim.fn.fnameescape(file))
vim.bo.filetype = "lean"
vim.lsp.buf_attach_client(0, client)
vim.wait(120000, function() return #vim.diagnostic.get(0) > 0 end, 100)
vim.api.nvim_win_set_cursor(0, { tonumber(l), tonumber(c) })
vim.cmd("normal! zt")
vim.cmd("normal! 13\x19")  -- context above the cursor: the mistake a few lines up
local params = vim.lsp.util.make_position_params()
-- ask once and wait, so that the config's values (loaded on first use) are in the hover
vim.lsp.buf_request_sync(0, "textDocument/hover", params, 60000)
vim.lsp.buf.hover()
vim.defer_fn(function() vim.fn.writefile({ "ready" }, ready) end, 1500)
