package jsonx

var WholeNumber = wholeNumber
