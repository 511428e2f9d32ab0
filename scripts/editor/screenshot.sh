#!/usr/bin/env bash
# The README's picture of the editing loop, taken headless: Neovim in an xterm on a virtual X
# display (Xvfb), `tyr lsp` attached, examples/gpt/GPT.lean with one planted mistake (its
# diagnostic) and the hover of the MLP's hidden `let` (its type, and the type under config.json).
#
#   scripts/editor/screenshot.sh [OUT.png]       (default docs/editor/nvim.png)
#
# Needs: nvim (0.7+), Xvfb, xterm, ImageMagick's `import`, a TrueType monospace font
# (Debian: apt-get install neovim xvfb xterm imagemagick fonts-dejavu-core).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:-docs/editor/nvim.png}
python=${TYR_PYTHON:-$PWD/.venv/bin/python}
for tool in nvim Xvfb xterm import; do
  command -v "$tool" >/dev/null || { echo "screenshot.sh: $tool is not installed" >&2; exit 1; }
done

work=$(mktemp -d)
display=:$((90 + RANDOM % 9))
cleanup() { kill "${term_pid:-}" "${xvfb_pid:-}" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

mkdir -p "$work/gpt"
sed 's/dropout (linearBias3 y p.c_proj p.c_proj_bias) c.dropout/dropout (linearBias3 y p.c_attn p.c_proj_bias) c.dropout/' \
  examples/gpt/GPT.lean > "$work/gpt/GPT.lean"
cp examples/gpt/config.json "$work/gpt/config.json"
grep -q 'p.c_attn p.c_proj_bias' "$work/gpt/GPT.lean" || { echo "screenshot.sh: the mistake was not planted" >&2; exit 1; }
line=$(grep -n 'let h := gelu' "$work/gpt/GPT.lean" | cut -d: -f1)

Xvfb "$display" -screen 0 1500x860x24 -nolisten tcp >/dev/null 2>&1 &
xvfb_pid=$!
sleep 1
(cd "$work/gpt" && DISPLAY=$display TYR_FILE=GPT.lean TYR_READY="$work/ready" \
  TYR_PYTHON="$python" TYR_HOVER="$line:6" PYTHONPATH="$OLDPWD" \
  xterm -geometry 150x42+0+0 -fa 'DejaVu Sans Mono' -fs 11 -bg '#1e1e2e' -fg '#dcdce4' \
    -e nvim --clean -u NONE -c "luafile $OLDPWD/scripts/editor/screenshot.lua" GPT.lean) &
term_pid=$!
for _ in $(seq 1 240); do [[ -f $work/ready ]] && break; sleep 0.5; done
[[ -f $work/ready ]] || { echo "screenshot.sh: the editor was not ready within 120 s" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
import -display "$display" -window root -crop 1216x800+0+0 +repage "$out"
echo "wrote $out"
