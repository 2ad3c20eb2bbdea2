" Vim syntax file
" Language:    dyn (tensor programs with symbolic shapes)
" Filenames:   *.dyn
" Description: keywords, element types, reductions, math and built-in functions, commands,
"              comments, strings and numbers, as lang/reference.md describes them.
" Install:     copy to ~/.vim/syntax/dyn.vim and add to your vimrc
"                au BufRead,BufNewFile *.dyn setfiletype dyn

if exists("b:current_syntax")
  finish
endif
let s:cpo_save = &cpo
set cpo&vim

" Keywords (lang/tokens.def)
syn keyword dynKeyword      fn return import
syn keyword dynConditional  where
syn keyword dynOperatorWord and or not
syn keyword dynBoolean      true false
syn keyword dynFloatConst   inf nan

" Element types (lang/elem.def) and size parameters
syn keyword dynType         f32 f64 f16 bf16 i32 i64 bool size

" Reductions: sum max min prod, and scan, only when '[' follows (max(a, b) is the math function)
syn match   dynReduction    "\<\%(sum\|max\|min\|prod\|scan\)\ze\s*\["

" Math functions (lang/ops.def); max and min only when '(' follows
syn keyword dynMath         exp log sqrt rsqrt abs sin cos tanh sigmoid erf floor ceil round pow
syn match   dynMath         "\<\%(max\|min\)\ze\s*("

" Built-in functions (src/builtins.c)
syn keyword dynBuiltin      zeros ones full rand randn seed shape print load save allclose

" The name after fn
syn match   dynFuncName     "\%(\<fn\s\+\)\@<=\h\w*"

" Numbers: 42, 3.5, 3., 1e-5, 2.5E+3
syn match   dynNumber       "\<\d\+\>"
syn match   dynFloat        "\<\d\+\.\d*\%([eE][+-]\=\d\+\)\="
syn match   dynFloat        "\<\d\+[eE][+-]\=\d\+\>"

" Strings, on one line, with \n \t \" \\
syn match   dynEscape       +\\[nt"\\]+ contained
syn region  dynString       start=+"+ skip=+\\\\\|\\"+ end=+"+ end=+$+ oneline contains=dynEscape

" Comments
syn keyword dynTodo         TODO FIXME XXX NOTE contained
syn match   dynComment      "#.*$" contains=dynTodo

" Commands: a line whose first non-blank character is ':'; the rest of the line is its
" argument, '#' included
syn match   dynCommandArg   ".*$" contained
syn match   dynCommand      "^\s*:\a\+" nextgroup=dynCommandArg skipwhite

" Operators and the return arrow
syn match   dynOperator     "->\|\*\*\|[=!<>]=\|[-+*/%<>=]"

hi def link dynKeyword      Keyword
hi def link dynConditional  Conditional
hi def link dynOperatorWord Operator
hi def link dynBoolean      Boolean
hi def link dynFloatConst   Float
hi def link dynType         Type
hi def link dynReduction    Repeat
hi def link dynMath         Function
hi def link dynBuiltin      Special
hi def link dynFuncName     Function
hi def link dynNumber       Number
hi def link dynFloat        Float
hi def link dynEscape       SpecialChar
hi def link dynString       String
hi def link dynTodo         Todo
hi def link dynComment      Comment
hi def link dynCommand      PreProc
hi def link dynCommandArg   String
hi def link dynOperator     Operator

let b:current_syntax = "dyn"
let &cpo = s:cpo_save
unlet s:cpo_save
