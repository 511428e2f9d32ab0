-- Neovim's built-in LSP client against `tyr lsp`, headless: set the client up as TYR_INIT says
-- (docs/editor.md's snippet for this Neovim, which the test writes out), open a Lean file, wait
-- for the server's diagnostics, press `K` on TYR_HOVER, read the hover's window, quit.
--
--   TYR_INIT=setup.lua TYR_FILE=examples/gpt/GPT.lean TYR_OUT=out.txt [TYR_HOVER=LINE:COL] \
--   [TYR_HOVER_WAIT_MS=60000] nvim --headless --clean -u NONE \
--   -c 'luafile scripts/editor/nvim-check.lua'
--
-- The output has one line per diagnostic, `diagnostic LINE:COL: MESSAGE` (1-based line,
-- 0-based column, as `tyr check` prints them), then `hover ` and the hover window's lines, then
-- `done`. Written for Neovim 0.7 (Debian 12's) and later: `vim.diagnostic.get`, floating
-- windows read through `nvim_win_get_config`.
local file = assert(os.getenv("TYR_FILE"), "TYR_FILE is not set")
local out = assert(os.getenv("TYR_OUT"), "TYR_OUT is not set")
local init = assert(os.getenv("TYR_INIT"), "TYR_INIT is not set")
local lines = {}
if os.getenv("TYR_LSP_LOG") then vim.lsp.set_log_level("debug") end

local function finish(code)
  table.insert(lines, code == 0 and "done" or "failed")
  vim.fn.writefile(lines, out)
  vim.cmd(code == 0 and "qa!" or "cquit! " .. code)
end

dofile(init)  -- the documented setup: it starts and attaches the client when the file opens
vim.cmd("edit " .. vim.fn.fnameescape(file))

local got = vim.wait(120000, function() return #vim.diagnostic.get(0) > 0 end, 100)
if not got then
  table.insert(lines, "error: no diagnostics within 120 s")
  return finish(3)
end
for _, d in ipairs(vim.diagnostic.get(0)) do
  table.insert(lines, string.format("diagnostic %d:%d: %s", d.lnum + 1, d.col,
                                    d.message:gsub("\n", " ")))
end

local function floats()
  local wins = {}
  for _, w in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_config(w).relative ~= "" then table.insert(wins, w) end
  end
  return wins
end

local at = os.getenv("TYR_HOVER")
if at then
  local l, c = at:match("(%d+):(%d+)")
  vim.api.nvim_win_set_cursor(0, { tonumber(l), tonumber(c) })
  vim.cmd("normal K")  -- as a user presses it: the mapping the setup made, if any
  local wait = tonumber(os.getenv("TYR_HOVER_WAIT_MS") or "60000")
  if not vim.wait(wait, function() return #floats() > 0 end, 50) then
    table.insert(lines, "error: no hover window after K")
    return finish(4)
  end
  local shown = vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(floats()[1]), 0, -1, false)
  table.insert(lines, "hover " .. table.concat(shown, " "))
end
finish(0)
