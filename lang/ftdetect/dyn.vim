" Vim filetype detection for dyn: installed as vimfiles/ftdetect/dyn.vim beside
" syntax/dyn.vim (lang/dyn.vim), so that *.dyn files get their syntax with no vimrc line.
au BufRead,BufNewFile *.dyn setfiletype dyn
