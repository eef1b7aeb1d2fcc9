#!/usr/bin/env python3
"""The documentation's promises that a script can see (docs/testing.md, `docs_links`):
every relative link in README.md and docs/*.md names a file that exists, and every
#anchor a heading of that file (GitHub's slugs); README.md stays a newcomer's page of at
most 300 lines; every row of README's results table links to docs/results.md, where each
figure has its command and machine; README's layout names every folder of src/ and no
other.

usage: check_docs.py SOURCE_DIR"""
import glob
import os
import re
import sys

MAX_README_LINES = 300
LINK = re.compile(r'!?\[[^\]]*\]\(([^)\s]+)\)')


def prose_lines(text):
    """(line number, line) outside fenced code blocks, inline code spans blanked."""
    fence = None
    for n, line in enumerate(text.split('\n'), 1):
        m = re.match(r'^\s*(```+|~~~+)', line)
        if m:
            if fence is None:
                fence = m.group(1)[:3]
            elif m.group(1).startswith(fence):
                fence = None
            continue
        if fence is None:
            yield n, re.sub(r'`[^`]*`', '``', line)


def heading_slugs(path):
    """GitHub's anchors for the headings of a markdown file (code spans keep their words)."""
    seen, out = {}, set()
    fence = None
    for line in open(path, encoding='utf-8').read().split('\n'):
        m = re.match(r'^\s*(```+|~~~+)', line)
        if m:
            fence = None if fence else m.group(1)[:3]
            continue
        if fence:
            continue
        m = re.match(r'^#{1,6}\s+(.*?)\s*#*\s*$', line)
        if not m:
            continue
        s = re.sub(r'[^\w\- ]', '', m.group(1).lower()).replace(' ', '-')
        k = seen.get(s, 0)
        seen[s] = k + 1
        out.add(s if k == 0 else f'{s}-{k}')
    return out


def check_links(src, path, errors):
    text = open(path, encoding='utf-8').read()
    rel = os.path.relpath(path, src)
    for n, line in prose_lines(text):
        for target in LINK.findall(line):
            if re.match(r'^[a-z][a-z0-9+.-]*:', target):   # http:, https:, mailto:
                continue
            file_part, _, anchor = target.partition('#')
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(dest):
                errors.append(f'{rel}:{n}: link to {target}: {os.path.relpath(dest, src)} does not exist')
                continue
            if anchor:
                if not dest.endswith('.md') or os.path.isdir(dest):
                    errors.append(f'{rel}:{n}: link to {target}: an anchor into a file that is not markdown')
                elif anchor not in heading_slugs(dest):
                    errors.append(f'{rel}:{n}: link to {target}: {os.path.relpath(dest, src)} has no heading '
                                  f'whose anchor is #{anchor}')


def check_readme(src, errors):
    path = os.path.join(src, 'README.md')
    lines = open(path, encoding='utf-8').read().split('\n')
    count = len(lines) - (1 if lines and lines[-1] == '' else 0)
    if count > MAX_README_LINES:
        errors.append(f'README.md: {count} lines, more than {MAX_README_LINES}: move guides to docs/ '
                      f'and figures to docs/results.md')
    in_results, rows = False, 0
    for n, line in enumerate(lines, 1):
        if line.startswith('## '):
            in_results = line.strip() == '## Results'
            continue
        if not in_results or not line.startswith('|') or re.match(r'^\|[\s|:-]+\|\s*$', line):
            continue
        rows += 1
        if rows == 1:
            continue                                         # the header row
        if '](docs/results.md' not in line:
            errors.append(f'README.md:{n}: a results row without a link to docs/results.md: {line[:80]}')
    if rows < 2:
        errors.append('README.md: no "## Results" section with a table')

    # The layout block: `src/NAME/` at the start of a line, against the folders of src/.
    text = '\n'.join(lines)
    m = re.search(r'^## Layout\n(.*?)(?=^## |\Z)', text, re.S | re.M)
    shown = set(re.findall(r'^src/([A-Za-z0-9_]+)/', m.group(1), re.M)) if m else set()
    real = {d for d in os.listdir(os.path.join(src, 'src')) if os.path.isdir(os.path.join(src, 'src', d))}
    for d in sorted(real - shown):
        errors.append(f'README.md: the layout does not list src/{d}/')
    for d in sorted(shown - real):
        errors.append(f'README.md: the layout lists src/{d}/, which does not exist')


def main():
    src = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else '.')
    errors = []
    files = [os.path.join(src, 'README.md')] + sorted(glob.glob(os.path.join(src, 'docs', '*.md')))
    for path in files:
        check_links(src, path, errors)
    check_readme(src, errors)
    for e in errors:
        print(e)
    if errors:
        print(f'check_docs: {len(errors)} problem(s)')
        return 1
    print(f'check_docs: {len(files)} files, every link resolves; README.md within {MAX_README_LINES} lines')
    return 0


if __name__ == '__main__':
    sys.exit(main())
