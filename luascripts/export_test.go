package luascripts

// NumScripts is how many scripts there are.
const NumScripts = int(numScripts) - 1
