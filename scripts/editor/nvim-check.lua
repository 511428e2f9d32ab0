-- Neovim's built-in LSP client against `tyr lsp`, headless: open a Lean file, wait for the
-- server's diagnostics, ask for a hover, write what the editor got, quit.
--
--   TYR_FILE=examples/gpt/GPT.lean TYR_OUT=out.txt [TYR_PYTHON=.venv/bin/python] \
--   [TYR_HOVER=LINE:COL] nvim --headless --clean -u NONE -c 'luafile scripts/editor/nvim-check.lua'
--
-- The output has one line per diagnostic, `diagnostic LINE:COL: MESSAGE` (1-based line,
-- 0-based column, as `tyr check` prints them), then `hover ` and the hover's text, then `done`.
-- Written for Neovim 0.7 (Debian 12's): `vim.lsp.start_client` + `buf_attach_client`,
-- `vim.diagnostic.get` (`vim.lsp.start` came in 0.8).
local file = assert(os.getenv("TYR_FILE"), "TYR_FILE is not set")
local out = assert(os.getenv("TYR_OUT"), "TYR_OUT is not set")
local python = os.getenv("TYR_PYTHON") or "python3"
local lines = {}
if os.getenv("TYR_LSP_LOG") then vim.lsp.set_log_level("debug") end

local function finish(code)
  table.insert(lines, code == 0 and "done" or "failed")
  vim.fn.writefile(lines, out)
  vim.cmd(code == 0 and "qa!" or "cquit! " .. code)
end

local client = vim.lsp.start_client({
  name = "tyr",
  cmd = { python, "-m", "pytyr.cli", "lsp" },
  root_dir = vim.fn.getcwd(),
  init_options = { debounceMs = 50 },
})
if not client then
  table.insert(lines, "error: the language server did not start")
  return finish(2)
end
vim.cmd("edit " .. vim.fn.fnameescape(file))
vim.lsp.buf_attach_client(0, client)

local got = vim.wait(120000, function() return #vim.diagnostic.get(0) > 0 end, 100)
if not got then
  table.insert(lines, "error: no diagnostics within 120 s")
  return finish(3)
end
for _, d in ipairs(vim.diagnostic.get(0)) do
  table.insert(lines, string.format("diagnostic %d:%d: %s", d.lnum + 1, d.col,
                                    d.message:gsub("\n", " ")))
end

local at = os.getenv("TYR_HOVER")
if at then
  local l, c = at:match("(%d+):(%d+)")
  local params = { textDocument = vim.lsp.util.make_text_document_params(),
                   position = { line = tonumber(l) - 1, character = tonumber(c) } }
  local res = vim.lsp.buf_request_sync(0, "textDocument/hover", params, 60000) or {}
  for _, r in pairs(res) do
    if r.result and r.result.contents then
      table.insert(lines, "hover " .. r.result.contents.value:gsub("\n", " "))
    end
  end
end
finish(0)
