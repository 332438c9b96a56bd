package config

import (
	"errors"
	"strings"
)

// splitCommand splits [opensm] command into words the way a POSIX shell splits
// simple words, so that the value reads like the command line an operator would
// type:
//
//   - blanks separate words;
//   - single quotes keep everything up to the next single quote;
//   - double quotes keep everything up to the next double quote, except that a
//     backslash there escapes '"' and '\' (before any other character it stays);
//   - outside quotes a backslash keeps the next character as it is.
//
// Nothing is expanded: '$', '~' and '*' stay as written, because the command is run
// directly, never by a shell.
func splitCommand(s string) ([]string, error) {
	var (
		words  []string
		word   strings.Builder
		inWord bool // a word has started, even if it is still empty, as with ""
		quote  rune // the open quote, or 0
		escape bool // the previous character was a backslash
	)
	for _, r := range s {
		switch {
		case escape && quote == '"':
			if r != '"' && r != '\\' {
				word.WriteRune('\\')
			}
			word.WriteRune(r)
			escape = false
		case escape:
			word.WriteRune(r)
			escape = false
		case r == '\\' && quote != '\'':
			escape = true
			inWord = true
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				word.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote = r
			inWord = true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		case r == '#' && !inWord:
			// A shell reads the rest as a comment; here it would be
			// arguments to OpenSM. Quoted ('#') it is a word.
			return nil, errors.New("a word starts with an unquoted '#', which a shell reads as a comment: comments go on lines of their own")
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	switch {
	case quote == '\'':
		return nil, errors.New("unterminated single quote")
	case quote == '"':
		return nil, errors.New("unterminated double quote")
	case escape:
		return nil, errors.New("ends with a backslash that escapes nothing")
	}
	if inWord {
		words = append(words, word.String())
	}
	if len(words) == 0 || words[0] == "" {
		return nil, errors.New("no executable")
	}
	return words, nil
}
